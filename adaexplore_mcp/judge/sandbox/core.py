"""Confine a runner, the process that imports and runs untrusted candidate or reference code.

A runner is forked from the warm zygote and calls `enter(policy)` first, single-threaded, before CUDA
is initialized and before any untrusted import. Only kernel mechanisms are used, through libc (ctypes).
The threat is a hostile candidate; why each mechanism is there:

- PDEATHSIG(SIGKILL), setsid: a runner dies with its parent, never left behind, out of its terminal.
- pid namespace + a fresh /proc: the server cannot be seen or signalled (`kill(server_pid)`: ESRCH), nor
  its environment read through /proc/<pid>/, and all the candidate starts dies with the runner, pid 1 of
  the namespace (when pid 1 dies, the kernel kills the rest). unshare() does not move the caller into
  the namespace, so `enter` forks once more: the caller becomes a relay that waits and passes on the exit
  status (a signal death as the same signal); pid 1 has PDEATHSIG on the relay, so killing the pid the
  parent knows kills everything. Where that fork fails (no pid to spare), the runner exits: never half in.
- oom_score_adj 1000: the out-of-memory killer takes a runner before the judge's own processes.
- a control group of its own (cgroup.py): pids.max and a host memory limit that bind root and CUDA
  runners, where RLIMIT_NPROC and RLIMIT_AS do not.
- mount namespace, made private first (nothing may propagate to the host): an empty read-only tmpfs over
  each hidden dir (the data dir: the shared SQLite store can be neither read nor written); private
  size-limited tmpfs on /tmp and /dev/shm (no filling the disk or the host's shared memory, nothing seen
  by other runs); every mount bind-remounted read-only (never a superblock remount: that would change the
  host) except /proc, the private tmp and the writable dirs, which get a mount of their own first (bound
  back into place when under a hidden dir); /proc/sys and friends read-only too, as uid 0 may write sysctls
  without any capability.
- a private /dev, read-only: a tmpfs holding only the pseudo devices (null, zero, full, random, urandom)
  and the GPU's nodes, each bound from the host's (CUDA needs /dev/nvidia*), and /dev/shm. The host's
  disks, loop devices, /dev/kvm, terminals are not there to open (uid 0 passes their permission bits).
- network namespace, empty, loopback down: nowhere to send data, not even the server's HTTP port.
- IPC namespace: System V shared memory, semaphores and POSIX message queues are per namespace and go
  with it, so nothing a candidate leaves there outlives its runner for the next one to read (a policy
  switch; CUDA IPC, the GPU runners' wire, works across it: H100, 2026-12-06, bench/results/2026-12-06-a).
- working directory "/", set before and after the mounts: a cwd inherited from the server (its data dir,
  ~) stays reachable under the cover mounted over it, through relative paths and /proc/self/cwd.
- user namespace, only without CAP_SYS_ADMIN (a normal user needs it for the others): maps the caller's
  own uid and gid, setgroups denied.
- rlimits: FSIZE (SIGXFSZ ignored: EFBIG instead of death), NOFILE, CORE=0, AS when asked (not with CUDA,
  which reserves huge virtual ranges).
- every capability dropped, then PR_SET_NO_NEW_PRIVS: with CAP_SYS_ADMIN (root, or anyone in its own user
  namespace) a candidate could simply unmount the tmpfs over the data dir.

Known gap for a root caller: uid 0 without capabilities still passes the permission bits of root-owned
files it can see (read-only), and the GPU's device nodes are the host's; where the private /dev cannot be
made, the host's /dev is read-only but its nodes open (the filter refuses the loop devices' ioctls, a channel
between runners that outlived the judge). Serve as a normal user.

An unavailable mechanism (EPERM in a container, no user namespaces, not Linux) is recorded in
`SandboxReport.missing` with a one-line reason and the rest still applies; `enter` raises only on
programming errors.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import sys
from dataclasses import dataclass

from . import cgroup as sandbox_cgroup
from .rlimits import set_rlimits
from .mounts import Mounts
from .syscalls import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    LINUX,
    PR_CAP_AMBIENT,
    PR_CAP_AMBIENT_CLEAR_ALL,
    PR_CAPBSET_DROP,
    PR_SET_NO_NEW_PRIVS,
    PR_SET_PDEATHSIG,
    Log,
    check,
    libc,
    prctl,
    unshare,
)

_NAMESPACES = ("user-ns", "mount-ns", "pid-ns", "net-ns", "ipc-ns")
EXIT_ORPHANED = 111  # the parent died before PR_SET_PDEATHSIG was armed: nobody wants this runner
# unshare(CLONE_NEWPID) was made but no process could be forked into the namespace: going on would run the
# candidate with the host's /proc and signals under a summary that says "namespaces"
EXIT_NO_PID_NS = 112


@dataclass(frozen=True)
class SandboxPolicy:
    hidden_dirs: tuple[str, ...] = ()  # an empty read-only tmpfs is mounted over each
    writable_dirs: tuple[str, ...] = ()  # stay writable (e.g. the Triton cache) when / is read-only
    tmp_dir: str | None = None  # a private tmpfs mounted here (and on /dev/shm if private_shm); TMPDIR=tmp_dir
    tmp_size_mb: int = 256
    max_file_bytes: int = 64 << 20  # RLIMIT_FSIZE
    max_open_files: int = 512  # RLIMIT_NOFILE
    max_address_space: int | None = None  # RLIMIT_AS; leave None with CUDA
    pid_namespace: bool = True
    network: bool = False  # False -> a new, empty network namespace
    ipc_namespace: bool = True  # SysV IPC and POSIX queues of its own (False if CUDA IPC needs the host's)
    readonly_root: bool = True
    # Read-only binds back into place when a cover (the private tmp, a hidden dir) would hide them: the
    # Python installation and this package when they live under /tmp (a CI virtual environment).
    visible_dirs: tuple[str, ...] = ()
    # A private /dev/shm too; False on a GPU: torch's CUDA IPC keeps its reference counters in files
    # there that the other side opens by name.
    private_shm: bool = True
    # A private /dev of the pseudo devices and the GPU's nodes (sandbox_mounts.DEVICE_NODES), read-only.
    private_dev: bool = True
    deny_unix_sockets: bool = True  # seccomp: socket(AF_UNIX), socketpair, io_uring, keyrings fail; seccomp.py
    max_processes: int | None = 1024  # the group's pids.max; RLIMIT_NPROC above the user's count (not for root)
    max_memory_bytes: int | None = None  # the group's memory limit (host memory; binds with CUDA, unlike AS)
    cpu_group: bool = True  # one scheduling entity, however many processes it starts (cgroup.py)


@dataclass(frozen=True)
class SandboxReport:
    mechanisms: tuple[str, ...]  # what was applied
    missing: tuple[str, ...]  # "what: why" for each thing asked for but unavailable

    @property
    def summary(self) -> str:
        """Shown in every evaluation result: "namespaces+rlimits+cgroups+seccomp", "rlimits", "none"..."""
        parts = ["namespaces"] if any(m in self.mechanisms for m in _NAMESPACES) else []
        parts += ["rlimits"] if "rlimits" in self.mechanisms else []
        parts += ["cgroups"] if any(m.startswith("cgroup-") for m in self.mechanisms) else []
        parts += ["seccomp"] if "seccomp-unix" in self.mechanisms else []
        return "+".join(parts) or "none"

# The parent of a forked child, as it was at fork time: if it is gone by the time `enter` arms
# PR_SET_PDEATHSIG, the signal will never come, so `enter` exits instead.
_fork = {"pending": 0, "parent": 0}
os.register_at_fork(before=lambda: _fork.update(pending=os.getpid()),
                    after_in_child=lambda: _fork.update(parent=_fork["pending"]))


def enter(policy: SandboxPolicy, defer_filter: bool = False) -> SandboxReport:
    """Confine the calling process (a freshly forked, single-threaded child). With a pid namespace this
    returns in a new grandchild, pid 1 of the namespace, and the caller's process only relays its exit.
    PDEATHSIG fires when the *thread* that forked the caller ends: fork from one that outlives it.
    With `defer_filter` the seccomp filter is left to `install_filter`, after the caller made its CUDA context
    (the driver's own start-up needs what the filter refuses) and before it runs anything untrusted."""
    if not isinstance(policy, SandboxPolicy):
        raise TypeError(f"enter() needs a SandboxPolicy, got {type(policy).__name__}")
    for d in policy.hidden_dirs + policy.writable_dirs + policy.visible_dirs + ((policy.tmp_dir,) if policy.tmp_dir else ()):
        if not os.path.isabs(d):
            raise ValueError(f"sandbox paths must be absolute: {d!r}")
    log = Log()
    if LINUX:
        log.attempt("pdeathsig", prctl, PR_SET_PDEATHSIG, signal.SIGKILL)
        if _fork["parent"] and os.getppid() != _fork["parent"]:
            os._exit(EXIT_ORPHANED)
        with contextlib.suppress(OSError):
            os.setsid()  # fails only for a session leader
        log.attempt("cwd-root", os.chdir, "/")  # the relay's too
        log.attempt("oom-first", _oom_first)
        _join_cgroups(policy, log)
        _enter_namespaces(policy, log)
    else:
        log.miss("namespaces", f"not Linux ({sys.platform})")
    set_rlimits(policy, log, LINUX)  # before the fork: the relay must not dump core either
    if "pid-ns" in log.mechanisms:
        _fork_into_pid_namespace(log)
    if "mount-ns" in log.mechanisms:
        Mounts(policy, log).apply()
    elif LINUX:
        log.miss("mounts", "no mount namespace: nothing hidden, / stays writable")
    if LINUX:
        log.attempt("cwd-root", os.chdir, "/")  # looked up again, through the mounts just made
        _drop_privileges(log)
        if policy.deny_unix_sockets and not defer_filter:
            from .seccomp import deny_unix_sockets

            log.attempt("seccomp-unix", deny_unix_sockets)
    return SandboxReport(tuple(log.mechanisms), tuple(log.missing))


def install_filter(policy: SandboxPolicy, report: SandboxReport) -> SandboxReport:
    """The filter `enter(..., defer_filter=True)` left out, in every thread of the process now; the report with
    it applied or missing."""
    if not (policy.deny_unix_sockets and LINUX):
        return report
    from .seccomp import deny_unix_sockets

    log = Log()
    log.mechanisms, log.missing = list(report.mechanisms), list(report.missing)
    log.attempt("seccomp-unix", deny_unix_sockets, True)
    return SandboxReport(tuple(log.mechanisms), tuple(log.missing))


def _oom_first() -> None:
    """The kernel's out-of-memory killer picks a runner before anything else: a candidate that spreads its memory
    over child processes ranked them below the zygote and the referee."""
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write("1000")


def _join_cgroups(policy: SandboxPolicy, log: Log) -> None:
    """Before the pid namespace's fork, so that every process of the sandbox is in the runner's group."""
    if policy.max_processes is None and policy.max_memory_bytes is None and not policy.cpu_group:
        return
    for name, why in sandbox_cgroup.join(policy.max_processes, policy.max_memory_bytes, policy.cpu_group):
        if why is None:
            log.ok(name)
        else:
            log.miss(name, why)


def _has_cap_sys_admin() -> bool:
    try:
        with open("/proc/self/status") as f:
            return bool(next(int(ln.split()[1], 16) for ln in f if ln.startswith("CapEff:")) >> 21 & 1)
    except (OSError, StopIteration, ValueError):
        return False


def _new_user_namespace(uid: int, gid: int) -> None:
    unshare(CLONE_NEWUSER)
    for path, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{path}", "wb", buffering=0) as f:
            f.write(text.encode())  # one write(), as the kernel requires


def _enter_namespaces(policy: SandboxPolicy, log: Log) -> None:
    wanted = [(CLONE_NEWNS, "mount-ns"), (CLONE_NEWPID, "pid-ns"), (CLONE_NEWNET, "net-ns"), (CLONE_NEWIPC, "ipc-ns")]
    asked = {"pid-ns": policy.pid_namespace, "net-ns": not policy.network, "ipc-ns": policy.ipc_namespace}
    wanted = [w for w in wanted if asked.get(w[1], True)]
    if not _has_cap_sys_admin() and not log.attempt("user-ns", _new_user_namespace, os.geteuid(), os.getegid()):
        log.missing += [f"{name}: needs a user namespace (no CAP_SYS_ADMIN)" for _, name in wanted]
        return
    for flag, name in wanted:
        log.attempt(name, unshare, flag)


def _fork_into_pid_namespace(log: Log) -> None:
    """Fork pid 1 of the new namespace; this process becomes the relay and never returns."""
    try:  # listed now: once the sandbox mounts its own /proc, this process has no /proc/self there
        open_fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        open_fds = list(range(3, min(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 1 << 16)))
    alive_r, alive_w = os.pipe()
    try:
        pid = os.fork()
    except OSError:  # out of pids: never go on half inside (the host's /proc, signals, no threads)
        os._exit(EXIT_NO_PID_NS)
    if pid == 0:
        os.close(alive_w)
        with contextlib.suppress(OSError):  # a failure is already reported
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        os.set_blocking(alive_r, False)
        with contextlib.suppress(BlockingIOError):
            if os.read(alive_r, 1) == b"":  # the relay died before PDEATHSIG was armed
                os._exit(EXIT_ORPHANED)
        os.close(alive_r)
        return
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    for fd in open_fds:  # the parent then sees EOF on its socket exactly when the sandbox is gone
        if fd > 2:
            with contextlib.suppress(OSError):
                os.close(fd)
    try:
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    except ChildProcessError:
        code = 1
    if code < 0:
        with contextlib.suppress(OSError, ValueError):  # SIGKILL and SIGSTOP cannot be reset, nor need to
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        code = 128 - code
    os._exit(code)


def _drop_privileges(log: Log) -> None:
    """No way back: without CAP_SYS_ADMIN the mounts above cannot be undone."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        try:
            prctl(PR_CAPBSET_DROP, cap)
        except OSError:
            break  # EINVAL: past the last one; EPERM: no CAP_SETPCAP, so no caps (no-new-privs covers exec)
    with contextlib.suppress(OSError):  # kernels before 4.3 have no ambient set
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    log.attempt("no-caps", lambda: check(libc.capset(header, (ctypes.c_uint32 * 6)()), "capset"))
    log.attempt("no-new-privs", prctl, PR_SET_NO_NEW_PRIVS, 1)
