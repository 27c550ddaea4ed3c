#!/usr/bin/env bash
# Ray for the GPU host within the device tool's 64 MiB carry. The wheel is 79 MB; judge actors never load
# its Java jars, RLlib, Data, Serve, Tune or Train, and without them one xz tarball is about 30 MB.
# Usage, from the repo root:  bash bench/ray_bundle.sh   (fills .raybundle/, git-ignored)
# Carry .raybundle beside the wheels; on the GPU host, once the package's wheels are installed (they bring
# jsonschema, the one dependency of ray's core the host lacks), run the line this prints.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
grep -qxF '/.raybundle/' .git/info/exclude 2>/dev/null || echo '/.raybundle/' >> .git/info/exclude
version="${RAY_VERSION:-2.60.0}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux2014_x86_64 -d "$work" "ray==$version"
mkdir -p "$work/tree" .raybundle
(cd "$work/tree" && unzip -q "$work"/ray-*.whl && rm -rf ray/jars ray/rllib ray/data ray/serve ray/tune ray/train)
tar cf - -C "$work/tree" . | xz -6 -T2 > .raybundle/ray.tar.xz
echo "ray $version bundle: $(du -h .raybundle/ray.tar.xz | cut -f1)" >&2
echo 'mkdir -p /tmp/site && tar xJf .raybundle/ray.tar.xz -C /tmp/site || exit 1;'
