"""The runner sandbox: what confines a process that imports and runs untrusted candidate or reference code.

One face: a runner forked from the zygote calls `enter(policy)` (and `install_filter` once CUDA is up); the
zygote manages each runner's cgroup through `cgroup`; `capabilities()` says what this host can apply (for
`adaexplore-mcp check` and the startup line). Inside: core.py (the order of the steps, and why each is there),
mounts.py (the private filesystem view), syscalls.py (libc calls through ctypes), seccomp.py, rlimits.py,
cgroup.py, probe.py.
"""

from . import cgroup
from .core import EXIT_NO_PID_NS, EXIT_ORPHANED, SandboxPolicy, SandboxReport, enter, install_filter
from .probe import capabilities

__all__ = ["EXIT_NO_PID_NS", "EXIT_ORPHANED", "SandboxPolicy", "SandboxReport", "capabilities", "cgroup", "enter",
           "install_filter"]
