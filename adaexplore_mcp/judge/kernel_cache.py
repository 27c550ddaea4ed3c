"""Compiled-kernel caches kept per candidate source, so no candidate can plant files for another.

A runner compiles into a private directory (on its private tmpfs, so its size is bounded and nothing
it writes reaches the host's disk). After the trials the referee asks for that directory's files and
keeps them under `<root>/<key>/`, the key being the hash of the source that produced them; a later
runner of the *same* source gets them back before it imports anything, so re-evaluating a kernel does
not compile it again. A hostile candidate can only poison its own future runs, which behave as it
chooses anyway; the replay of its call (replay.py), which must not run anything it made, gets only its device
code and metadata (`is_native`: launchers are host code). Sizes are bounded per source and in total (least recently used sources go first).

This module runs in the referee (trusted): file names coming back from a runner are checked here
before anything is written.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

MAX_FILES = 512  # per source
MAX_BYTES = 16 << 20  # per source (a few kernels take a few MB)
MAX_TOTAL_BYTES = 2 << 30  # every source together, on the host's disk
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}(/[A-Za-z0-9_.-]{1,128})?$")  # Triton's layout: <hash>/<file>


def safe_name(name: object) -> str | None:
    """A relative path of at most two plain components, or None (absolute, `..`, odd characters)."""
    if not isinstance(name, str) or not _NAME.match(name) or any(p in (".", "..") for p in name.split("/")):
        return None
    return name


NATIVE_SUFFIXES = (".so", ".py", ".pyc", ".pyd", ".dylib", ".dll")  # what a process loads and runs on the host


def is_native(name: str) -> bool:
    """Whether a cache file is host code (a launcher, a helper module) rather than device code or metadata."""
    return name.rsplit("/", 1)[-1].lower().endswith(NATIVE_SUFFIXES)


def read_tree(root: Path, max_files: int = MAX_FILES, max_bytes: int = MAX_BYTES) -> list[tuple[str, bytes]]:
    """The regular files under `root` (two levels, no symlinks followed), within the bounds; what does not
    fit is left out (a cache only loses speed)."""
    files: list[tuple[str, bytes]] = []
    total = 0
    if not root.is_dir():
        return files
    for path in sorted(root.rglob("*")):
        name = safe_name(path.relative_to(root).as_posix())
        if name is None or path.is_symlink() or not path.is_file():
            continue
        size = path.stat().st_size
        if len(files) >= max_files or total + size > max_bytes:
            break
        try:
            files.append((name, path.read_bytes()))
        except OSError:
            continue
        total += size
    return files


def write_tree(root: Path, files: list[tuple[str, bytes]]) -> int:
    """Write checked (name, bytes) pairs under `root`; returns how many were written."""
    written = 0
    for name, data in files:
        if safe_name(name) is None:
            continue
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
        written += 1
    return written


class KernelCache:
    """The referee's per-source store of compiled kernels."""

    def __init__(self, root: Path, max_total_bytes: int = MAX_TOTAL_BYTES) -> None:
        self.root = root
        self.max_total_bytes = max_total_bytes

    def _dir(self, key: str) -> Path:
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,100}", key):
            raise ValueError(f"bad cache key {key!r}")
        return self.root / key

    def files(self, key: str) -> list[tuple[str, bytes]]:
        """What earlier runs of this source compiled (empty when none); marks the source as recently used."""
        path = self._dir(key)
        if not path.is_dir():
            return []
        os.utime(path)
        return read_tree(path)

    def keep(self, key: str, files: object) -> int:
        """Store what a runner of this source sent back (replacing what was there); returns the file count.

        `files` comes from an untrusted runner: anything malformed is dropped, sizes are bounded."""
        checked: list[tuple[str, bytes]] = []
        total = 0
        for item in files if isinstance(files, list) else []:
            if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], bytes)):
                continue
            name = safe_name(item[0])
            if name is None or len(checked) >= MAX_FILES or total + len(item[1]) > MAX_BYTES:
                continue
            checked.append((name, item[1]))
            total += len(item[1])
        if not checked:
            return 0
        path = self._dir(key)
        fresh = path.with_name(f".{key}.{os.getpid()}.{time.monotonic_ns()}")
        write_tree(fresh, checked)
        shutil.rmtree(path, ignore_errors=True)
        try:
            os.replace(fresh, path)
        except OSError:  # another referee stored the same source at the same moment: either copy will do
            shutil.rmtree(fresh, ignore_errors=True)
        self.prune()
        return len(checked)

    def prune(self) -> None:
        """Least recently used sources out until the total is under the bound."""
        entries = []
        for d in self.root.iterdir() if self.root.is_dir() else []:
            if d.is_dir() and not d.name.startswith("."):
                size = sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
                entries.append((d.stat().st_mtime, size, d))
        total = sum(size for _, size, _ in entries)
        for _, size, d in sorted(entries, key=lambda e: e[0]):
            if total <= self.max_total_bytes:
                break
            shutil.rmtree(d, ignore_errors=True)
            total -= size


def kernel_cache_dir() -> Path:
    """In a runner, Triton's cache: private to it (the zygote points TRITON_CACHE_DIR into its scratch space)."""
    return Path(os.environ.get("TRITON_CACHE_DIR") or "/nonexistent")


def take_kernel_files(req: dict, bufs: list[bytes]) -> None:
    """In a runner: write the compiled kernels the referee sent into its Triton cache."""
    names = req.get("kernel_files") or []
    if names:
        write_tree(kernel_cache_dir(), list(zip(names, bufs)))

