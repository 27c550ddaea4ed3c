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
  parent knows kills everything.
- mount namespace, made private first (nothing may propagate to the host): an empty read-only tmpfs over
  each hidden dir (the data dir: the shared SQLite store can be neither read nor written); private
  size-limited tmpfs on /tmp and /dev/shm (no filling the disk or the host's shared memory, nothing seen
  by other runs); every mount bind-remounted read-only (never a superblock remount: that would change the
  host) except /dev (CUDA needs /dev/nvidia*), /proc, the private tmp and the writable dirs, which get a
  mount of their own first (bound back into place when under a hidden dir); /proc/sys and friends
  read-only too, as uid 0 may write sysctls without any capability.
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
- /dev read-only (its device nodes still open for writing: the mount flag covers files, dirs and links).

Known gap for a root caller: uid 0 without capabilities still passes the permission bits of root-owned
files, and /dev is the host's, so root-owned device nodes stay reachable (the filter refuses the loop devices'
ioctls, a channel between runners that outlived the judge). Serve as a normal user.

An unavailable mechanism (EPERM in a container, no user namespaces, not Linux) is recorded in
`SandboxReport.missing` with a one-line reason and the rest still applies; `enter` raises only on
programming errors.
"""

from __future__ import annotations

import ctypes
import contextlib
import os
import re
import resource
import signal
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

from .rlimits import set_rlimits

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x10000000, 0x20000000, 0x40000000
CLONE_NEWIPC = 0x08000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 8, 32, 4096, 16384
MS_PRIVATE, MS_RELATIME, MS_STRICTATIME = 1 << 18, 1 << 21, 1 << 24
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 1, 24, 38, 47, 4
# statvfs f_flag bit -> the mount flag a bind remount must repeat (they are locked in a user namespace)
_KEPT_FLAGS = ((2, MS_NOSUID), (4, MS_NODEV), (8, MS_NOEXEC), (1024, 1024), (2048, 2048), (4096, MS_RELATIME))
_PROC_READONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")
_NAMESPACES = ("user-ns", "mount-ns", "pid-ns", "net-ns", "ipc-ns")
EXIT_ORPHANED = 111  # the parent died before PR_SET_PDEATHSIG was armed: nobody wants this runner


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
    deny_unix_sockets: bool = True  # seccomp: socket(AF_UNIX), socketpair, io_uring, keyrings fail; seccomp.py
    max_processes: int | None = 1024  # RLIMIT_NPROC above the user's current count (not enforced for root)


@dataclass(frozen=True)
class SandboxReport:
    mechanisms: tuple[str, ...]  # what was applied
    missing: tuple[str, ...]  # "what: why" for each thing asked for but unavailable

    @property
    def summary(self) -> str:
        """Shown in every evaluation result: "namespaces+rlimits+seccomp", "rlimits", "none"..."""
        parts = ["namespaces"] if any(m in self.mechanisms for m in _NAMESPACES) else []
        parts += [name for name, m in (("rlimits", "rlimits"), ("seccomp", "seccomp-unix")) if m in self.mechanisms]
        return "+".join(parts) or "none"


class _Log:
    def __init__(self) -> None:
        self.mechanisms, self.missing = list[str](), list[str]()

    def ok(self, name: str) -> None:
        if name not in self.mechanisms:
            self.mechanisms.append(name)

    def miss(self, name: str, why: object) -> None:
        if isinstance(why, OSError):
            why = (why.strerror or str(why)) + (f" ({why.filename})" if why.filename else "")
        self.missing.append(f"{name}: {why}")

    def attempt(self, name: str, fn: Callable[..., object], *args: object) -> bool:
        """Run one step; record it as applied, or as missing with the reason it failed."""
        try:
            fn(*args)
        except OSError as e:
            self.miss(name, e)
            return False
        self.ok(name)
        return True


_LINUX = sys.platform.startswith("linux")
_libc = ctypes.CDLL(None, use_errno=True) if _LINUX else None
if _libc is not None:
    _libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
    _libc.unshare.argtypes = [ctypes.c_int]
    _libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
    _libc.capset.argtypes = [ctypes.c_void_p, ctypes.c_void_p]


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), what)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    b = [None if s is None else os.fsencode(s) for s in (source, target, fstype, data)]
    _check(_libc.mount(b[0], b[1], b[2], flags, b[3]), target)


def _prctl(option: int, arg: int = 0) -> None:
    _check(_libc.prctl(option, arg, 0, 0, 0), f"prctl({option})")


def _unshare(flag: int) -> None:
    names = {CLONE_NEWUSER: "CLONE_NEWUSER", CLONE_NEWNS: "CLONE_NEWNS", CLONE_NEWPID: "CLONE_NEWPID",
             CLONE_NEWIPC: "CLONE_NEWIPC"}
    _check(_libc.unshare(flag), f"unshare({names.get(flag, 'CLONE_NEWNET')})")


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
    log = _Log()
    if _LINUX:
        log.attempt("pdeathsig", _prctl, PR_SET_PDEATHSIG, signal.SIGKILL)
        if _fork["parent"] and os.getppid() != _fork["parent"]:
            os._exit(EXIT_ORPHANED)
        with contextlib.suppress(OSError):
            os.setsid()  # fails only for a session leader
        log.attempt("cwd-root", os.chdir, "/")  # the relay's too
        _enter_namespaces(policy, log)
    else:
        log.miss("namespaces", f"not Linux ({sys.platform})")
    set_rlimits(policy, log, _LINUX)  # before the fork: the relay must not dump core either
    if "pid-ns" in log.mechanisms:
        _fork_into_pid_namespace(log)
    if "mount-ns" in log.mechanisms:
        _Mounts(policy, log).apply()
    elif _LINUX:
        log.miss("mounts", "no mount namespace: nothing hidden, / stays writable")
    if _LINUX:
        log.attempt("cwd-root", os.chdir, "/")  # looked up again, through the mounts just made
        _drop_privileges(log)
        if policy.deny_unix_sockets and not defer_filter:
            from .seccomp import deny_unix_sockets

            log.attempt("seccomp-unix", deny_unix_sockets)
    return SandboxReport(tuple(log.mechanisms), tuple(log.missing))


def install_filter(policy: SandboxPolicy, report: SandboxReport) -> SandboxReport:
    """The filter `enter(..., defer_filter=True)` left out, in every thread of the process now; the report with
    it applied or missing."""
    if not (policy.deny_unix_sockets and _LINUX):
        return report
    from .seccomp import deny_unix_sockets

    log = _Log()
    log.mechanisms, log.missing = list(report.mechanisms), list(report.missing)
    log.attempt("seccomp-unix", deny_unix_sockets, True)
    return SandboxReport(tuple(log.mechanisms), tuple(log.missing))


def _has_cap_sys_admin() -> bool:
    try:
        with open("/proc/self/status") as f:
            return bool(next(int(ln.split()[1], 16) for ln in f if ln.startswith("CapEff:")) >> 21 & 1)
    except (OSError, StopIteration, ValueError):
        return False


def _new_user_namespace(uid: int, gid: int) -> None:
    _unshare(CLONE_NEWUSER)
    for path, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{path}", "wb", buffering=0) as f:
            f.write(text.encode())  # one write(), as the kernel requires


def _enter_namespaces(policy: SandboxPolicy, log: _Log) -> None:
    wanted = [(CLONE_NEWNS, "mount-ns"), (CLONE_NEWPID, "pid-ns"), (CLONE_NEWNET, "net-ns"), (CLONE_NEWIPC, "ipc-ns")]
    asked = {"pid-ns": policy.pid_namespace, "net-ns": not policy.network, "ipc-ns": policy.ipc_namespace}
    wanted = [w for w in wanted if asked.get(w[1], True)]
    if not _has_cap_sys_admin() and not log.attempt("user-ns", _new_user_namespace, os.geteuid(), os.getegid()):
        log.missing += [f"{name}: needs a user namespace (no CAP_SYS_ADMIN)" for _, name in wanted]
        return
    for flag, name in wanted:
        log.attempt(name, _unshare, flag)


def _fork_into_pid_namespace(log: _Log) -> None:
    """Fork pid 1 of the new namespace; this process becomes the relay and never returns."""
    try:  # listed now: once the sandbox mounts its own /proc, this process has no /proc/self there
        open_fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        open_fds = list(range(3, min(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 1 << 16)))
    alive_r, alive_w = os.pipe()
    try:
        pid = os.fork()
    except OSError as e:  # e.g. out of pids: go on outside the namespace
        for fd in (alive_r, alive_w):
            os.close(fd)
        log.mechanisms.remove("pid-ns")
        log.miss("pid-ns", e)
        return
    if pid == 0:
        os.close(alive_w)
        with contextlib.suppress(OSError):  # a failure is already reported
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
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


class _Mounts:
    """Everything done inside the new mount namespace, in order."""

    def __init__(self, policy: SandboxPolicy, log: _Log) -> None:
        self.policy, self.log = policy, log
        self.hidden = [d for d in map(os.path.realpath, policy.hidden_dirs) if os.path.isdir(d)]
        for d in set(map(os.path.realpath, policy.hidden_dirs)) - set(self.hidden):
            if os.path.lexists(d):
                log.miss("hidden-dirs", f"not a directory, not hidden ({d})")
        self.writable = [os.path.realpath(d) for d in policy.writable_dirs]
        self.visible = [os.path.realpath(d) for d in policy.visible_dirs if os.path.isdir(d)]
        for d in [v for v in self.visible if any(_under(h, v) for h in self.hidden)]:  # sys.path[0] = the data dir
            self.visible.remove(d)
            log.miss("visible-dirs", f"not shown: it is or holds a hidden dir ({d})")
        self.tmp = os.path.realpath(policy.tmp_dir) if policy.tmp_dir else None
        # /dev itself goes read-only like the rest: a device node stays usable on a read-only mount (only
        # regular files, dirs and links get EROFS), but new files no longer land in the host's devtmpfs (red
        # team, round 4: root filled it). /dev/shm stays writable: the private one, or the host's on a GPU.
        self.exempt = ["/dev/shm", "/dev/pts", "/proc"] + self.writable + self.hidden

    def apply(self) -> None:
        log = self.log
        if not log.attempt("private-mounts", _mount, None, "/", None, MS_REC | MS_PRIVATE):
            log.miss("mounts", "nothing mounted: it could propagate to the host")
            return
        if "pid-ns" in log.mechanisms:
            log.attempt("fresh-proc", _mount, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        writable_fds = []
        for path in self.writable:  # opened before the covers, to bind the real dirs back under them
            try:
                os.makedirs(path, exist_ok=True)
                writable_fds.append((path, os.open(path, os.O_PATH | os.O_DIRECTORY)))
            except OSError as e:
                log.miss("writable-dirs", e)
        visible_fds = []
        for path in self.visible:
            try:
                visible_fds.append((path, os.open(path, os.O_PATH | os.O_DIRECTORY)))
            except OSError as e:
                log.miss("visible-dirs", e)
        hidden = self._covers()
        for path, fd in writable_fds:
            log.attempt("writable-dirs", self._bind_writable, path, fd)
            os.close(fd)
        for path, fd in visible_fds:
            if log.attempt("visible-dirs", self._bind_writable, path, fd):
                log.attempt("visible-dirs", _mount, None, path, None,
                            MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
            os.close(fd)
        for path in hidden:
            log.attempt("hidden-dirs", _mount, None, path, None,
                        MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
        if self.policy.readonly_root:
            self._readonly_root()

    def _covers(self) -> list[str]:
        """tmpfs mounts, shallowest first: the hidden dirs (read-write until the writable dirs are bound
        back) and the private /tmp and /dev/shm. Returns the hidden dirs covered."""
        size = f"size={max(1, self.policy.tmp_size_mb)}m,mode=1777"
        covers = [(p, "size=1m,mode=755") for p in self.hidden]
        if self.tmp:
            # The private tmpfs goes on tmp_dir itself: covering all of /tmp would also hide whatever is
            # installed there (a virtual environment under /tmp, as CI makes), and with it Python.
            privates = [self.tmp] + (["/dev/shm"] if self.policy.private_shm and os.path.isdir("/dev/shm") else [])
            covers += [(p, size) for p in privates]
        else:
            privates = []
        hidden = []
        for path, opts in sorted(covers, key=lambda c: c[0].count("/")):
            name = "private-tmp" if path in privates else "hidden-dirs"
            try:
                os.makedirs(path, exist_ok=True)  # a hidden dir under an earlier cover is still shown, empty
            except OSError as e:
                self.log.miss(name, e)
                continue
            if self.log.attempt(name, _mount, "tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, opts) \
                    and name == "hidden-dirs":
                hidden.append(path)
        if self.tmp and "private-tmp" in self.log.mechanisms:
            self.log.attempt("private-tmp", self._tmp_dir)
        return hidden

    def _tmp_dir(self) -> None:
        os.environ["TMPDIR"] = self.tmp
        tempfile.tempdir = None  # forget a cached gettempdir()
        self.exempt += [self.tmp]

    def _bind_writable(self, path: str, fd: int) -> None:
        here, there = (os.stat(path) if os.path.isdir(path) else None), os.fstat(fd)
        if here is not None and (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino):
            _mount(path, path, None, MS_BIND | MS_REC)  # a mount of its own, left writable below
        else:  # under a cover: bring the real directory back
            os.makedirs(path, exist_ok=True)
            _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)

    def _readonly_root(self) -> None:
        forced = [p for p in _PROC_READONLY if os.path.exists(p)
                  and self.log.attempt("ro-proc", _mount, p, p, None, MS_BIND | MS_REC)]
        root_ok, failed = False, []
        for point in _mount_points():
            if point not in forced and any(_under(point, e) for e in self.exempt):
                continue
            try:
                kept = os.statvfs(point).f_flag
                flags = MS_REMOUNT | MS_BIND | MS_RDONLY | sum(ms for st, ms in _KEPT_FLAGS if kept & st)
                _mount(None, point, None, flags | (0 if kept & (1024 | 4096) else MS_STRICTATIME))
                root_ok = root_ok or point == "/"
            except OSError as e:
                failed.append(f"{point} ({e.strerror})")
        if root_ok:
            self.log.ok("ro-root")
        else:
            self.log.miss("ro-root", "/ could not be remounted read-only")
        if failed:
            more = f" and {len(failed) - 3} more" if len(failed) > 3 else ""
            self.log.miss("ro-root", f"{len(failed)} mounts stay writable: {', '.join(failed[:3])}{more}")


def _under(path: str, prefix: str) -> bool:
    return prefix == "/" or path == prefix or path.startswith(prefix.rstrip("/") + "/")


def _mount_points() -> list[str]:
    with open("/proc/self/mountinfo") as f:  # field 5 is the mount point, with octal escapes
        points = [re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), ln.split()[4]) for ln in f]
    return list(dict.fromkeys(points))


def _drop_privileges(log: _Log) -> None:
    """No way back: without CAP_SYS_ADMIN the mounts above cannot be undone."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        try:
            _prctl(PR_CAPBSET_DROP, cap)
        except OSError:
            break  # EINVAL: past the last one; EPERM: no CAP_SETPCAP, so no caps (no-new-privs covers exec)
    with contextlib.suppress(OSError):  # kernels before 4.3 have no ambient set
        _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    log.attempt("no-caps", lambda: _check(_libc.capset(header, (ctypes.c_uint32 * 6)()), "capset"))
    log.attempt("no-new-privs", _prctl, PR_SET_NO_NEW_PRIVS, 1)
