"""A control group per runner: ceilings on its processes and host memory that bind uid 0 too.

Why: RLIMIT_NPROC does not bind root, which the judge runs as on GPU hosts, and RLIMIT_AS cannot be set with
CUDA (the driver reserves huge virtual ranges), so a candidate there could take every pid of the host (and
every other evaluation's fork failed) or all of its memory. The kernel's pids and
memory controllers count every task and every page of the runner's sandbox, whatever its uid. The cpu
controller, with no limit, makes the runner one scheduling entity: the CPU it gets beside another worker's
runner does not grow with the processes it starts (200 busy children took an honest
evaluation past its timeout).

Layout: `<the zygote's own cgroup>/adaexplore-runners/runner-<pid>` in each hierarchy holding a controller
(cgroup v1: one per controller; v2: the unified one, where its parent delegates the controller). The runner
joins its group in `sandbox.enter`, before its pid namespace, so everything it starts is counted; the mounts
that follow make /sys read-only, so it cannot raise its limits or leave. The zygote removes the group when it
reaps the runner (`remove`), and at start the empty groups a dead zygote left (`sweep`). What a group saw
(its out-of-memory kills, the forks it refused) is read before removal (`limits_hit`): a runner the kernel
killed for its memory is then said to be, not just "killed by SIGKILL".

A host without a writable cgroup file system (a normal user, most containers) is recorded as missing, with
the reason, and the rlimits stay the only ceilings.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

CONTROLLERS = ("pids", "memory", "cpu")
EMPTY_WAIT_S = 3.0  # how long the zygote waits for a dead runner's processes to go before it reports the runner gone
GROUP = "adaexplore-runners"
STALE_S = 30.0  # a group this old and empty is a dead runner's (a live one joins within milliseconds)


@dataclass(frozen=True)
class Hierarchy:
    """One mounted cgroup hierarchy as this process sees it."""
    version: int  # 1 or 2
    controllers: tuple[str, ...]  # of CONTROLLERS, the ones this hierarchy serves
    own: str  # this process's group, a directory under the mount


@functools.cache
def hierarchies() -> tuple[Hierarchy, ...]:
    """The hierarchies serving CONTROLLERS, each controller once (a v1 hierarchy before the unified one). Read
    once per process: the zygote's, inherited by its runners, whose groups are made below it."""
    try:
        with open("/proc/self/cgroup") as f:
            cgroup = f.read()
        with open("/proc/self/mountinfo") as f:
            mountinfo = f.read()
    except OSError:
        return ()
    return parse_hierarchies(cgroup, mountinfo, _available)


def _available(group: str) -> list[str]:
    try:
        with open(os.path.join(group, "cgroup.controllers")) as f:
            return f.read().split()
    except OSError:
        return []


def parse_hierarchies(cgroup: str, mountinfo: str, available: Callable[[str], list[str]]) -> tuple[Hierarchy, ...]:
    """`hierarchies` from the text of /proc/self/cgroup and /proc/self/mountinfo; `available(dir)`: the
    controllers a v2 group offers (its cgroup.controllers)."""
    lines = [ln.split(":", 2) for ln in cgroup.splitlines() if ln.count(":") >= 2]
    v1_paths = {c: path for _, ctrls, path in lines for c in ctrls.split(",") if c}
    v2_path = next((path for hid, ctrls, path in lines if hid == "0" and not ctrls), None)
    found: list[Hierarchy] = []
    served: set[str] = set()
    unified: tuple[str, str] | None = None
    for fields in (ln.split() for ln in mountinfo.splitlines()):
        if "-" not in fields or len(fields) < 5:
            continue
        tail = fields[fields.index("-") + 1:]
        root, point, fstype = fields[3], _unescape(fields[4]), tail[0] if tail else ""
        if fstype == "cgroup":
            options = tail[2].split(",") if len(tail) > 2 else []
            ctrls = tuple(c for c in CONTROLLERS if c in options and c not in served and c in v1_paths)
            own = _below(point, root, v1_paths[ctrls[0]]) if ctrls else None
            if own:
                found.append(Hierarchy(1, ctrls, own))
                served.update(ctrls)
        elif fstype == "cgroup2" and v2_path is not None and unified is None:
            unified = (point, root)
    if unified is not None and (own := _below(*unified, v2_path or "/")):
        ctrls = tuple(c for c in CONTROLLERS if c in available(own) and c not in served)
        if ctrls:
            found.append(Hierarchy(2, ctrls, own))
    return tuple(found)


def _unescape(field: str) -> str:
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def _below(point: str, root: str, path: str) -> str | None:
    """Where `path` (as /proc/self/cgroup names it) lies under a mount of `root` at `point`, if it does."""
    if root != "/" and path != root and not path.startswith(root.rstrip("/") + "/"):
        return None
    rel = path[len(root):] if root != "/" else path
    return os.path.join(point, rel.lstrip("/")).rstrip("/") or "/"


def group_dirs(pid: int) -> list[tuple[Hierarchy, str]]:
    """Each hierarchy with the directory of runner `pid`'s group in it."""
    return [(h, os.path.join(h.own, GROUP, f"runner-{pid}")) for h in hierarchies()]


def join(max_processes: int | None, max_memory_bytes: int | None,
         cpu: bool = True) -> list[tuple[str, OSError | str | None]]:
    """Make this process's group (its pid: the zygote knows it) in every hierarchy, set the limits, move in.
    Returns (mechanism, None) for each limit applied and (mechanism, why) for each that could not be (sandbox
    Log.miss words an OSError)."""
    wanted = {"pids": max_processes, "memory": max_memory_bytes, "cpu": 0 if cpu else None}
    results: list[tuple[str, OSError | str | None]] = []
    for h, path in group_dirs(os.getpid()):
        ctrls = [c for c in h.controllers if wanted[c] is not None]
        if not ctrls:
            continue
        try:
            _make(h, path, ctrls)
            for c in ctrls:
                _limit(h, path, c, int(wanted[c]))  # type: ignore[arg-type]
            _write(os.path.join(path, "cgroup.procs"), str(os.getpid()))
        except OSError as e:
            with contextlib.suppress(OSError):
                os.rmdir(path)
            results += [(f"cgroup-{c}", e) for c in ctrls]
            continue
        results += [(f"cgroup-{c}", None) for c in ctrls]
    named = {name for name, _ in results}
    return results + [(f"cgroup-{c}", "no cgroup hierarchy with this controller is mounted")
                      for c, limit in wanted.items() if limit is not None and f"cgroup-{c}" not in named]


def _make(h: Hierarchy, path: str, ctrls: list[str]) -> None:
    parent = os.path.dirname(path)
    if h.version == 2:  # the controllers must be enabled in every group above the runner's, below the own one
        _enable(h.own, ctrls)
        with contextlib.suppress(FileExistsError):
            os.mkdir(parent)
        _enable(parent, ctrls)
    else:
        with contextlib.suppress(FileExistsError):
            os.mkdir(parent)
    try:
        os.mkdir(path)
    except FileExistsError:  # an earlier runner's of this pid: a fresh one, never its counters or processes
        os.rmdir(path)
        os.mkdir(path)


def _enable(group: str, ctrls: list[str]) -> None:
    with open(os.path.join(group, "cgroup.subtree_control")) as f:
        enabled = f.read().split()
    missing = [c for c in ctrls if c not in enabled]
    if missing:  # EBUSY where the group holds processes itself (v2's rule): its parent did not delegate
        _write(os.path.join(group, "cgroup.subtree_control"), " ".join(f"+{c}" for c in missing))


def _limit(h: Hierarchy, path: str, ctrl: str, value: int) -> None:
    if ctrl == "cpu":
        return  # the default weight: one share, like every other runner's
    if ctrl == "pids":
        _write(os.path.join(path, "pids.max"), str(value))
    elif h.version == 2:
        _write(os.path.join(path, "memory.max"), str(value))
        with contextlib.suppress(FileNotFoundError):  # no swap accounting: nothing to escape into
            _write(os.path.join(path, "memory.swap.max"), "0")
    else:
        _write(os.path.join(path, "memory.limit_in_bytes"), str(value))
        with contextlib.suppress(FileNotFoundError, PermissionError):  # memory+swap, where swap is accounted
            _write(os.path.join(path, "memory.memsw.limit_in_bytes"), str(value))


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def limits_hit(pid: int) -> list[str]:
    """What runner `pid`'s group refused it: "memory" (the kernel killed a process for it), "processes"."""
    hit: list[str] = []
    for h, path in group_dirs(pid):
        if "memory" in h.controllers:
            counts = _counters(os.path.join(path, "memory.events" if h.version == 2 else "memory.oom_control"))
            if counts.get("oom_kill", 0) > 0:
                hit.append("memory")
        if "pids" in h.controllers and _counters(os.path.join(path, "pids.events")).get("max", 0) > 0:
            hit.append("processes")
    return hit


def _counters(path: str) -> dict[str, int]:
    try:
        with open(path) as f:
            return {k: int(v) for k, v in (ln.split()[:2] for ln in f if len(ln.split()) >= 2) if v.isdigit()}
    except (OSError, ValueError):
        return {}


def end(pid: int, wait_s: float = EMPTY_WAIT_S) -> bool:
    """Kill whatever of runner `pid` is still alive, by its groups (the last processes of a pid namespace may
    take seconds to go after its relay is reaped, on a loaded host), wait for them, remove the groups. True
    when none is left; one that stays is removed by `remove` or `sweep` later."""
    dirs = [path for _, path in group_dirs(pid) if os.path.isdir(path)]
    deadline = time.monotonic() + wait_s
    while dirs:
        alive = [p for d in dirs for p in _procs(d)]
        if not alive:
            break
        for p in alive:
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGKILL)
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return remove(pid)


def _procs(group: str) -> list[int]:
    try:
        with open(os.path.join(group, "cgroup.procs")) as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


def remove(pid: int, wait_s: float = 0.2) -> bool:
    """Remove runner `pid`'s groups once its processes are gone (the last of a pid namespace may take a moment
    to be released after its relay is reaped). True when none is left."""
    deadline = time.monotonic() + wait_s
    left = [path for _, path in group_dirs(pid) if os.path.isdir(path)]
    while left:
        left = [p for p in left if not _rmdir(p)]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.005)
    return not left


def _rmdir(path: str) -> bool:
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def sweep(stale_s: float = STALE_S) -> int:
    """Remove the empty runner groups older than `stale_s` (a zygote that died leaves them); a live runner's
    group holds processes and stays. Returns how many went."""
    removed, now = 0, time.time()
    for h in hierarchies():
        base = os.path.join(h.own, GROUP)
        try:
            entries = list(os.scandir(base))
        except OSError:
            continue
        for entry in entries:
            try:
                old = now - entry.stat(follow_symlinks=False).st_mtime > stale_s
            except OSError:
                continue
            if entry.name.startswith("runner-") and old and _rmdir(entry.path):
                removed += 1
    return removed
