"""The resource limits a runner's sandbox sets (core.py): file size, open files, core dumps, address space,
processes. A module of its own to keep core.py about namespaces and mounts."""

from __future__ import annotations

import os
import resource
import signal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .core import SandboxPolicy


def set_rlimits(policy: SandboxPolicy, log: Any, linux: bool) -> None:
    """Every limit the policy asks for, each one capped by its hard limit; `log` records them (sandbox._Log)."""
    nproc = _user_tasks() + policy.max_processes if policy.max_processes is not None and linux else None
    limits = [(resource.RLIMIT_FSIZE, policy.max_file_bytes), (resource.RLIMIT_NOFILE, policy.max_open_files),
              (resource.RLIMIT_CORE, 0), (resource.RLIMIT_AS, policy.max_address_space),
              (resource.RLIMIT_NPROC, nproc)]
    ok = True
    for res, value in limits:
        try:
            if value is not None:
                hard = resource.getrlimit(res)[1]
                value = value if hard == resource.RLIM_INFINITY else min(value, hard)
                resource.setrlimit(res, (value, value))
        except (OSError, ValueError) as e:
            ok = False
            log.miss("rlimits", f"resource {res}: {e}")
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    if ok:
        log.ok("rlimits")


def _user_tasks() -> int:
    """Threads of this real uid now (RLIMIT_NPROC counts a user's threads, host-wide): the limit is set
    above it, so a fork bomb stops after max_processes more and nothing already running is refused."""
    uid, count = os.getuid(), 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if os.stat(entry.path).st_uid == uid:
                    count += len(os.listdir(f"{entry.path}/task"))
            except OSError:
                continue
    return count
