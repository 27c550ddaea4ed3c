#!/usr/bin/env bash
# Every GPU measurement of this project in one batch (device time is scarce: one call does it all).
# Usage on the GPU host, from the repo root, after the wheel line of ../shared/gpu/wheels.sh:
#   bash bench/gpu_run.sh "$OUT"
# Writes results under bench/results/<date>/ (copied back as one tarball in $1) and a log.
set -u
OUT_DIR="${1:-/tmp/gpu_out}"
STAMP="$(date -u +%Y-%m-%d)"
RES="bench/results/$STAMP"
mkdir -p "$RES" "$OUT_DIR"
export PYTHONUNBUFFERED=1
HOME_DIR="$(mktemp -d /tmp/adaexplore-home.XXXX)"
stage() {  # stage NAME SECONDS COMMAND...: run with a time cap, log, never stop the batch
  local name="$1" cap="$2"; shift 2
  echo "== $name (cap ${cap}s) $(date -u +%T)"
  local t0=$SECONDS
  timeout --signal=INT --kill-after=10 "$cap" "$@" > "$RES/$name.txt" 2>&1
  echo "   rc=$? in $((SECONDS - t0))s"
  tail -n 40 "$RES/$name.txt"
}
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv
  python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
} > "$RES/environment.txt" 2>&1
cat "$RES/environment.txt"

stage judge_latency 150 python3 bench/judge_latency.py --out "$RES/judge_latency.json"
stage judge_gpu_tests 90 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_judge_gpu.py
# The rest share one data directory (and so one lock per GPU: timings never overlap).
stage search_strategies 170 python3 bench/search_strategies.py --tasks 3 --budget 8 --home "$HOME_DIR" \
  --out "$RES/search_strategies.json" &
stage adapt_loop 170 python3 bench/adapt_loop.py --tasks 12 --drafts 4 --seed 0 --home "$HOME_DIR/adapt" \
  --out "$RES/adapt_loop.json" &
wait
mkdir -p "$RES/worked"
stage worked_example 60 env ADAEXPLORE_HOME="$HOME_DIR/worked" python3 -m adaexplore_mcp demo --task rmsnorm --budget 12
cp "$HOME_DIR"/worked/exports/* "$RES/worked/" 2>/dev/null
stage collect_errors 45 python3 bench/collect_errors.py --mode native --out "$RES/errors-gpu.json"
tar czf "$OUT_DIR/gpu_results.tgz" bench/results
echo "== done $(date -u +%T)"
