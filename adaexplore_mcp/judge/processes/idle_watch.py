"""Does a cached reference runner work while nobody asks it anything? Read from the host's /proc.

A task's reference runner is kept between evaluations (referee.py). A hostile reference can start a thread at
import that keeps running there: burning a core, or doing device work while another task's candidate is
timed. The runner's own report of its threads cannot be trusted (the reference runs in that process), so the
referee reads the CPU time of the runner's whole process tree from /proc, where the reference cannot reach:
when an evaluation ends (`mark`), and again when the next one takes the runner (`busy_while_idle`). More CPU
than IDLE_ALLOWANCE_S plus IDLE_SHARE of the idle time means something kept running; the referee replaces the
runner and says why. Gaps shorter than MIN_IDLE_S are not judged (allocator and thread-pool wind-down).
A thread that sleeps and wakes only during a timing is not caught this way.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

IDLE_ALLOWANCE_S = 0.5
IDLE_SHARE = 0.1
MIN_IDLE_S = 1.0
# A runner's tree is its relay, pid 1 of its namespace and perhaps a helper; sleeping children by the hundred
# use no CPU but hold the host's pids (RLIMIT_NPROC does not bind root).
MAX_IDLE_PROCESSES = 32
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class IdleMark:
    cpu_s: float
    at: float


def children(pid: int) -> list[int]:
    """The pids of a process's children (every thread's), from the host's /proc; [] when it is gone."""
    kids: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids += [int(p) for p in f.read().split()]
    except (OSError, ValueError):
        pass
    return kids


def _cpu_s(pid: int) -> float:
    """utime + stime of one process (all its threads) and of the children it reaped (cutime + cstime: work
    done in short-lived forks), in seconds; 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return sum(int(v) for v in fields[11:15]) / _TICK
    except (OSError, ValueError, IndexError):
        return 0.0


def tree_cpu_s(pid: int) -> float | None:
    """CPU seconds of `pid` and every process below it (None without /proc)."""
    found = _tree(pid)
    return None if found is None else found[0]


def _tree(pid: int) -> tuple[float, int] | None:
    """CPU seconds and the number of processes of `pid`'s tree (None without /proc); counted up to 4096."""
    if not os.path.isdir(f"/proc/{pid}"):
        return None
    total, todo, seen = 0.0, [pid], set()
    while todo and len(seen) < 4096:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        total += _cpu_s(p)
        todo += children(p)
    return total, len(seen)


def mark(pid: int) -> IdleMark | None:
    cpu = tree_cpu_s(pid)
    return None if cpu is None else IdleMark(cpu, time.monotonic())


def busy_while_idle(pid: int, since: IdleMark | None) -> str | None:
    """Why the runner must be replaced, or None (never judged, or idle as it should be)."""
    if since is None:
        return None
    idle = time.monotonic() - since.at
    found = _tree(pid)
    if found is None:
        return None
    cpu, processes = found
    if processes > MAX_IDLE_PROCESSES:
        return (f"the task's reference left {processes} processes behind between evaluations (the host's process "
                "table is shared: later runners could not start); its process was replaced. A reference must not "
                "leave processes running")
    if idle < MIN_IDLE_S:
        return None
    used = cpu - since.cpu_s
    if used <= IDLE_ALLOWANCE_S + IDLE_SHARE * idle:
        return None
    return (f"the task's reference kept running between evaluations ({used:.1f} s of CPU in {idle:.1f} s idle: a "
            "thread or process it started?); its process was replaced. A reference must not leave work running")
