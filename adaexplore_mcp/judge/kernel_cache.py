"""Compiled-kernel caches kept per candidate source, so no candidate can plant files for another.

A runner compiles into a private directory (on its private tmpfs, so its size is bounded and nothing
it writes reaches the host's disk). After the trials the referee asks for that directory's files and
keeps them under `<root>/<key>/`, the key being the hash of the source that produced them; a later
runner of the *same* source gets them back before it imports anything, so re-evaluating a kernel does
not compile it again. A hostile candidate can only poison its own future runs, which behave as it
chooses anyway; the replay of its call (replay/run.py), which must not run anything it made, gets only its device
code and metadata (`is_native`: launchers are host code). Sizes are bounded per source and in total, and
so is the number of sources (least recently used sources go first). Sizes are charged as the disk pays
them, in whole blocks per file and per folder: 512 empty files in 512 folders cost 4 MiB, not 0.

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
MAX_BYTES = 16 << 20  # per source, charged (a few kernels take a few MB)
MAX_TOTAL_BYTES = 2 << 30  # every source together, charged, on the host's disk
MAX_SOURCES = 4096  # sources kept at once: each costs a folder and a lookup in `prune`, whatever its size
# A file or folder takes at least one block (and an inode) on disk however few bytes it holds: each is charged
# at least this much, so a source of many empty files cannot grow the cache without bound.
BLOCK = 4096
STALE_S = 600.0  # a temporary folder this old is a dead referee's half-stored source (storing takes under a second)
# Each stored source's charged size, written into its folder with its files (so prune reads one small file, not
# the tree). Not a name `safe_name` lets through: no runner can send it, and `read_tree` never sends it on.
RECORD = "#charge"
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


def charge(size: int) -> int:
    """What a file of `size` bytes costs on disk: whole blocks, one at least (an empty file still takes an inode)."""
    return max(1, -(-size // BLOCK)) * BLOCK


class Budget:
    """The per-source bounds, counted as the disk pays: each file in whole blocks, each folder one block, and the
    source's own folder and record. `read_tree` (in the runner) and `keep` (in the referee) count alike, so what
    a runner sends fits what the referee keeps."""

    def __init__(self, max_files: int = MAX_FILES, max_bytes: int = MAX_BYTES) -> None:
        self.max_files, self.max_bytes = max_files, max_bytes
        self.files, self.charged = 0, 2 * BLOCK  # the source's folder and its record
        self.folders: set[str] = set()

    def admit(self, name: str, size: int) -> bool:
        """Count a file `name` of `size` bytes if it fits; False (nothing counted) if it does not."""
        folder = name.rpartition("/")[0]
        cost = charge(size) + (BLOCK if folder and folder not in self.folders else 0)
        if self.files >= self.max_files or self.charged + cost > self.max_bytes:
            return False
        self.files += 1
        self.charged += cost
        if folder:
            self.folders.add(folder)
        return True


def read_tree(root: Path, max_files: int = MAX_FILES, max_bytes: int = MAX_BYTES) -> list[tuple[str, bytes]]:
    """The regular files under `root` (two levels, no symlinks followed), within the bounds; what does not
    fit is left out (a cache only loses speed)."""
    files: list[tuple[str, bytes]] = []
    budget = Budget(max_files, max_bytes)
    if not root.is_dir():
        return files
    for path in sorted(root.rglob("*")):
        name = safe_name(path.relative_to(root).as_posix())
        if name is None or path.is_symlink() or not path.is_file():
            continue
        if not budget.admit(name, path.stat().st_size):
            break
        try:
            files.append((name, path.read_bytes()))
        except OSError:  # gone meanwhile: its charge stays counted (fewer files sent, never more)
            continue
    return files


def without_conflicts(files: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """The files whose names can all be written together: a name that is also another's folder ("b" beside
    "b/c") goes with every name under it, and a repeated name after its first. Written as they came, such
    names made `write_tree` fail half-way."""
    folders = {name.partition("/")[0] for name, _ in files if "/" in name}
    clashes = {name for name, _ in files if name in folders}
    seen: set[str] = set()
    kept = []
    for name, data in files:
        if name.partition("/")[0] in clashes or name in seen:
            continue
        seen.add(name)
        kept.append((name, data))
    return kept


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


def walk_charge(folder: Path) -> int:
    """What a folder's tree costs on disk, counted file by file (a folder stored before records were kept, or
    a temporary one being written: entries that vanish meanwhile are skipped)."""
    total = 0
    for top, _, names in os.walk(folder):
        total += BLOCK
        for name in names:
            try:
                total += charge(os.lstat(os.path.join(top, name)).st_size)
            except OSError:
                continue
    return total


def write_record(folder: Path, charged: int) -> None:
    """Write a source's charged size into its folder, whole or not at all."""
    tmp = folder / f"{RECORD}.{os.getpid()}"
    tmp.write_text(str(charged))
    os.replace(tmp, folder / RECORD)


def recorded_charge(folder: Path) -> int:
    """A stored source's charged size: its record, or one walk of its tree, recorded then for the next prune."""
    try:
        charged = int((folder / RECORD).read_text())
        if charged > 0:
            return charged
    except (OSError, ValueError):
        pass
    charged = walk_charge(folder) + BLOCK  # and the record about to be written
    try:
        st = folder.stat()
        write_record(folder, charged)
        os.utime(folder, ns=(st.st_atime_ns, st.st_mtime_ns))  # the record must not move it in the line
    except OSError:
        pass
    return charged


class KernelCache:
    """The referee's per-source store of compiled kernels."""

    def __init__(self, root: Path, max_total_bytes: int = MAX_TOTAL_BYTES, max_sources: int = MAX_SOURCES) -> None:
        self.root = root
        self.max_total_bytes = max_total_bytes
        self.max_sources = max_sources

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

        `files` comes from an untrusted runner: anything malformed is dropped, sizes are bounded. The files are
        written into a temporary folder that then replaces the source's whole; a failure removes it (a hidden
        folder left behind is never served, and only `prune` would ever see it)."""
        checked, charged = _checked(files)
        if not checked:
            return 0
        path = self._dir(key)
        fresh = path.with_name(f".{key}.{os.getpid()}.{time.monotonic_ns()}")
        try:
            write_tree(fresh, checked)
            write_record(fresh, charged)
            shutil.rmtree(path, ignore_errors=True)
            try:
                os.replace(fresh, path)
            except OSError:  # another referee stored the same source at the same moment: either copy will do
                pass
        finally:
            shutil.rmtree(fresh, ignore_errors=True)  # gone already when it became the source's folder
        self.prune()
        return len(checked)

    def prune(self) -> None:
        """Least recently used sources out until the charged total and the number of sources are within their
        bounds. Temporary folders (".<key>.<pid>.<ns>") count while young and go once stale (their referee died).
        Each source's size is read from its record: no tree is walked but a young temporary's or an old folder's
        without one."""
        entries, total = [], 0
        now = time.time()
        for entry in os.scandir(self.root) if self.root.is_dir() else []:
            try:
                if not entry.is_dir(follow_symlinks=False):
                    continue
                mtime = entry.stat(follow_symlinks=False).st_mtime
            except OSError:  # removed meanwhile
                continue
            folder = Path(entry.path)
            if not entry.name.startswith("."):
                charged = recorded_charge(folder)
                entries.append((mtime, charged, folder))
                total += charged
            elif now - mtime > STALE_S:
                shutil.rmtree(folder, ignore_errors=True)
            else:
                total += walk_charge(folder)
        count = len(entries)
        for _, charged, folder in sorted(entries, key=lambda e: e[0]):
            if total <= self.max_total_bytes and count <= self.max_sources:
                break
            shutil.rmtree(folder, ignore_errors=True)
            total -= charged
            count -= 1


def _checked(files: object) -> tuple[list[tuple[str, bytes]], int]:
    """Of a runner's (name, bytes) pairs, those that are well formed, can be written together and fit one
    source's bounds, with what they charge."""
    named = [(name, item[1]) for item in (files if isinstance(files, list) else [])
             if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], bytes)
             and (name := safe_name(item[0])) is not None]
    budget = Budget()
    checked = [(name, data) for name, data in without_conflicts(named) if budget.admit(name, len(data))]
    return checked, budget.charged


def kernel_cache_dir() -> Path:
    """In a runner, Triton's cache: private to it (the zygote points TRITON_CACHE_DIR into its scratch space)."""
    return Path(os.environ.get("TRITON_CACHE_DIR") or "/nonexistent")


def take_kernel_files(req: dict, bufs: list[bytes]) -> None:
    """In a runner: write the compiled kernels the referee sent into its Triton cache."""
    names = req.get("kernel_files") or []
    if names:
        write_tree(kernel_cache_dir(), without_conflicts([(n, b) for n, b in zip(names, bufs) if safe_name(n)]))

