"""Confine a runner (the process that imports and runs untrusted candidate or reference code).

A runner is forked from the warm zygote and calls `enter(policy)` first thing, single-threaded, before
CUDA is initialized and before any untrusted import. Everything here is an existing kernel mechanism,
reached through libc with ctypes; nothing is emulated. Why each one is there (the threat is a hostile
candidate):

- PR_SET_PDEATHSIG(SIGKILL) + setsid: a runner whose parent dies dies too, and is out of the server's
  process group, so it can neither be left behind nor receive the terminal's signals.
- pid namespace + a fresh /proc: the candidate cannot see or signal the server (`kill(server_pid)` finds
  no such pid), cannot read the server's environment or command line through /proc/<pid>/environ, and
  everything it starts dies with it: the runner is pid 1 of the namespace, and when pid 1 dies the kernel
  kills every process in it. The caller is not moved into a new pid namespace by unshare(), so `enter`
  forks once more; the intermediate process (the pid the parent knows) only waits and relays the exit
  status, and because the sandbox has PDEATHSIG on it, killing the intermediate kills the whole namespace.
- mount namespace (made private first, so nothing propagates back to the host):
  - an empty read-only tmpfs over each hidden dir: the server's data dir, with the shared SQLite store,
    can be neither read nor written;
  - a private, size-limited tmpfs on /tmp and another on /dev/shm (TMPDIR points at `tmp_dir`): scratch
    files cannot fill the disk or the host's shared memory, or be seen by other runs;
  - / and every other mount bind-remounted read-only (never a superblock remount, which would change the
    host), except /dev (CUDA needs /dev/nvidia*, /dev/shm stays usable), /proc, the private tmp and the
    `writable_dirs` (e.g. the Triton cache), which are bind-mounted onto themselves first so they keep
    their own, writable mount. A writable dir inside a hidden dir is bound back into the hidden tmpfs.
    /proc/sys and friends are made read-only too (uid 0 may write sysctls without any capability).
- network namespace: an empty one (loopback down): no exfiltration, no talking to local services such
  as the server's own HTTP endpoint.
- user namespace: only for a non-root caller, who needs it to create the others (its own uid and gid
  are mapped, setgroups denied). Root with CAP_SYS_ADMIN creates the namespaces directly.
- rlimits: RLIMIT_FSIZE (SIGXFSZ ignored, so a big write fails with EFBIG instead of killing the runner),
  RLIMIT_NOFILE, RLIMIT_CORE=0 (no multi-GB core dumps of a CUDA process), RLIMIT_AS when asked (only
  without CUDA, which reserves huge virtual ranges).
- all capabilities dropped (bounding, ambient, effective, permitted) and PR_SET_NO_NEW_PRIVS, after the
  mounts are set up: otherwise a candidate holding CAP_SYS_ADMIN (root, or anyone in its user namespace)
  could simply unmount the tmpfs over the data dir or remount / read-write.

Known gap for a root caller: uid 0 without capabilities still passes the permission bits of root-owned
files, and /dev is the host's (on purpose, see above), so root-owned device nodes stay reachable. Run
the server as a normal user when candidates are hostile.

Every mechanism that is unavailable (EPERM in a container, a kernel without user namespaces, not Linux)
is recorded in `SandboxReport.missing` with a one-line reason and the rest still applies; `enter` raises
only on programming errors.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import resource
import select
import signal
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE = 1024, 2048, 4096, 16384, 1 << 18
MS_RELATIME, MS_STRICTATIME = 1 << 21, 1 << 24
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 1, 24, 38, 47, 4
CAP_SYS_ADMIN = 21
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
# statvfs f_flag bit -> mount flag that must be repeated on a bind remount (locked in a user namespace)
_KEPT_FLAGS = ((2, MS_NOSUID), (4, MS_NODEV), (8, MS_NOEXEC), (1024, MS_NOATIME), (2048, MS_NODIRATIME),
               (4096, MS_RELATIME))
_PROC_READONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")
_NAMESPACES = ("user-ns", "mount-ns", "pid-ns", "net-ns")
EXIT_ORPHANED = 111  # the parent died before PR_SET_PDEATHSIG was armed: nobody wants this runner


@dataclass(frozen=True)
class SandboxPolicy:
    hidden_dirs: tuple[str, ...] = ()  # an empty read-only tmpfs is mounted over each
    writable_dirs: tuple[str, ...] = ()  # stay writable even when the rest of / is read-only
    tmp_dir: str | None = None  # a private size-limited tmpfs on /tmp, also reachable here; TMPDIR points here
    tmp_size_mb: int = 256
    max_file_bytes: int = 64 << 20  # RLIMIT_FSIZE
    max_open_files: int = 512  # RLIMIT_NOFILE
    max_address_space: int | None = None  # RLIMIT_AS; leave None with CUDA
    pid_namespace: bool = True
    network: bool = False  # False -> a new, empty network namespace
    readonly_root: bool = True


@dataclass(frozen=True)
class SandboxReport:
    mechanisms: tuple[str, ...]  # what was applied
    missing: tuple[str, ...]  # "what: why" for each thing asked for but unavailable

    @property
    def summary(self) -> str:
        parts = (["namespaces"] if any(m in self.mechanisms for m in _NAMESPACES) else []) + (
            ["rlimits"] if "rlimits" in self.mechanisms else [])
        return "+".join(parts) or "none"


class _Log:
    def __init__(self) -> None:
        self.mechanisms: list[str] = []
        self.missing: list[str] = []

    def ok(self, name: str) -> None:
        if name not in self.mechanisms:
            self.mechanisms.append(name)

    def miss(self, name: str, why: object) -> None:
        self.missing.append(f"{name}: {_why(why) if isinstance(why, OSError) else why}")

    def report(self) -> SandboxReport:
        return SandboxReport(tuple(self.mechanisms), tuple(self.missing))


def _why(e: OSError) -> str:
    return (e.strerror or str(e)) + (f" ({e.filename})" if e.filename else "")


# ---- thin libc bindings -------------------------------------------------------------------------------

_LINUX = sys.platform.startswith("linux")
_libc = ctypes.CDLL(None, use_errno=True) if _LINUX else None
if _libc is not None:
    _libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    _libc.unshare.argtypes = [ctypes.c_int]
    _libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    _libc.capset.argtypes = [ctypes.c_void_p, ctypes.c_void_p]


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), what)


def _b(s: str | None) -> bytes | None:
    return None if s is None else os.fsencode(s)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc.mount(_b(source), _b(target), _b(fstype), flags, _b(data)), target)


def _prctl(option: int, arg: int = 0, arg3: int = 0) -> None:
    _check(_libc.prctl(option, arg, arg3, 0, 0), f"prctl({option})")


def _unshare(flags: int, what: str) -> None:
    _check(_libc.unshare(flags), what)


# The parent of a freshly forked child, recorded at fork time: if it is already gone when `enter` arms
# PR_SET_PDEATHSIG, the signal will never come, so `enter` exits instead.
_pending_parent: int | None = None
_fork_parent: int | None = None


def _before_fork() -> None:
    global _pending_parent
    _pending_parent = os.getpid()


def _after_fork_in_child() -> None:
    global _fork_parent
    _fork_parent = _pending_parent


os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)


# ---- enter --------------------------------------------------------------------------------------------

def enter(policy: SandboxPolicy) -> SandboxReport:
    """Confine the calling process (a freshly forked, single-threaded child). With a pid namespace this
    returns in a new grandchild, pid 1 of the namespace; the caller's process only relays its exit.
    PR_SET_PDEATHSIG fires when the *thread* that forked the caller exits: fork from one that outlives it."""
    if not isinstance(policy, SandboxPolicy):
        raise TypeError(f"enter() needs a SandboxPolicy, got {type(policy).__name__}")
    for d in policy.hidden_dirs + policy.writable_dirs + ((policy.tmp_dir,) if policy.tmp_dir else ()):
        if not os.path.isabs(d):
            raise ValueError(f"sandbox paths must be absolute: {d!r}")
    log = _Log()
    if not _LINUX:
        log.miss("namespaces", f"not Linux ({sys.platform})")
    else:
        _die_with_parent(log)
        _enter_namespaces(policy, log)
    _set_rlimits(policy, log)
    if "pid-ns" in log.mechanisms:
        _fork_into_pid_namespace(log)
    if "mount-ns" in log.mechanisms:
        _Mounts(policy, log).apply()
    elif _LINUX:
        log.miss("mounts", "no mount namespace: nothing hidden, / stays writable")
    if _LINUX:
        _drop_privileges(log)
    return log.report()


def _die_with_parent(log: _Log) -> None:
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        log.ok("pdeathsig")
    except OSError as e:
        log.miss("pdeathsig", e)
    if _fork_parent is not None and os.getppid() != _fork_parent:
        os._exit(EXIT_ORPHANED)
    try:
        os.setsid()
    except OSError:
        pass  # already a session leader


def _privileged() -> bool:
    if os.geteuid() != 0:
        return False
    try:
        with open("/proc/self/status") as f:
            eff = next(int(line.split()[1], 16) for line in f if line.startswith("CapEff:"))
        return bool(eff >> CAP_SYS_ADMIN & 1)
    except (OSError, StopIteration, ValueError):
        return False


def _enter_namespaces(policy: SandboxPolicy, log: _Log) -> None:
    wanted = [(CLONE_NEWNS, "mount-ns")]
    if policy.pid_namespace:
        wanted.append((CLONE_NEWPID, "pid-ns"))
    if not policy.network:
        wanted.append((CLONE_NEWNET, "net-ns"))
    if not _privileged():
        uid, gid = os.geteuid(), os.getegid()
        try:
            _unshare(CLONE_NEWUSER, "unshare(CLONE_NEWUSER)")
        except OSError as e:
            log.miss("user-ns", e)
            for _, name in wanted:
                log.miss(name, "needs a user namespace (not privileged)")
            return
        try:
            _map_ids(uid, gid)
            log.ok("user-ns")
        except OSError as e:
            log.miss("user-ns", f"id maps not written, files created here may fail: {_why(e)}")
    for flag, name in wanted:
        try:
            _unshare(flag, f"unshare({name})")
            log.ok(name)
        except OSError as e:
            log.miss(name, e)


def _map_ids(uid: int, gid: int) -> None:
    for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"{uid} {uid} 1\n"),
                       ("/proc/self/gid_map", f"{gid} {gid} 1\n")):
        try:
            fd = os.open(path, os.O_WRONLY)
        except FileNotFoundError:
            if path.endswith("setgroups"):
                continue  # kernels before 3.19 have no setgroups file
            raise
        try:
            os.write(fd, text.encode())  # one write(), as the kernel requires
        finally:
            os.close(fd)


def _fork_into_pid_namespace(log: _Log) -> None:
    """Fork pid 1 of the new namespace; this process becomes the relay and never returns."""
    try:  # listed now: once the sandbox mounts its own /proc, this process has no /proc/self there
        open_fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        open_fds = list(range(3, min(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 1 << 16)))
    alive_r, alive_w = os.pipe()
    try:
        pid = os.fork()
    except OSError as e:
        os.close(alive_r)
        os.close(alive_w)
        log.mechanisms.remove("pid-ns")
        log.miss("pid-ns", f"fork into the namespace failed: {_why(e)}")
        return
    if pid == 0:
        os.close(alive_w)
        try:
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        except OSError:
            pass  # already reported as missing
        os.set_blocking(alive_r, False)
        try:
            if os.read(alive_r, 1) == b"":  # the relay died before PDEATHSIG was armed
                os._exit(EXIT_ORPHANED)
        except BlockingIOError:
            pass
        os.close(alive_r)
        return
    _relay(pid, close=[fd for fd in open_fds if fd > 2])


def _relay(child: int, close: list[int]) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    for fd in close:  # the parent sees EOF on its socket exactly when the sandbox is gone
        try:
            os.close(fd)
        except OSError:
            pass
    try:
        _, status = os.waitpid(child, 0)
        code = os.waitstatus_to_exitcode(status)
    except ChildProcessError:
        code = 1
    if code < 0:
        try:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            signal.signal(-code, signal.SIG_DFL)
        except (OSError, ValueError):
            pass  # SIGKILL and SIGSTOP cannot be reset, and need not be
        os.kill(os.getpid(), -code)
        code = 128 - code
    os._exit(code)


class _Mounts:
    """Everything done inside the new mount namespace, in order."""

    def __init__(self, policy: SandboxPolicy, log: _Log) -> None:
        self.policy, self.log = policy, log
        self.hidden: list[str] = []
        for d in map(os.path.realpath, policy.hidden_dirs):
            if os.path.isdir(d):
                self.hidden.append(d)
            elif os.path.lexists(d):
                log.miss("hidden-dirs", f"not a directory, not hidden ({d})")
        self.writable = [os.path.realpath(d) for d in policy.writable_dirs]
        self.tmp = os.path.realpath(policy.tmp_dir) if policy.tmp_dir else None
        self.exempt = ["/dev", "/proc"] + self.writable + self.hidden
        self.hidden_mounted: list[str] = []

    def apply(self) -> None:
        try:
            _mount(None, "/", None, MS_REC | MS_PRIVATE)
        except OSError as e:  # mounting anything now could propagate to the host
            self.log.miss("mounts", f"/ could not be made private, nothing mounted: {_why(e)}")
            return
        if "pid-ns" in self.log.mechanisms:
            self._step("fresh-proc", _mount, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        writable_fds = self._open_writable()
        self._covers()
        for path, fd in writable_fds:
            self._step("writable-dirs", self._bind_writable, path, fd)
            os.close(fd)
        for path in self.hidden_mounted:
            self._step("hidden-dirs", _mount, None, path, None,
                       MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
        if self.policy.readonly_root:
            self._readonly_root()

    def _step(self, name: str, fn, *args) -> bool:
        try:
            fn(*args)
        except OSError as e:
            self.log.miss(name, e)
            return False
        self.log.ok(name)
        return True

    def _open_writable(self) -> list[tuple[str, int]]:
        fds = []
        for path in self.writable:
            try:
                os.makedirs(path, exist_ok=True)
                fds.append((path, os.open(path, os.O_PATH | os.O_DIRECTORY)))
            except OSError as e:
                self.log.miss("writable-dirs", e)
        return fds

    def _covers(self) -> None:
        """tmpfs mounts, shallowest first: hidden dirs (read-write until writable dirs are bound back)
        and the private /tmp."""
        covers = [(p, "size=1m,mode=755") for p in self.hidden]
        if self.tmp:
            covers.append(("/tmp", f"size={max(1, self.policy.tmp_size_mb)}m,mode=1777"))
            if os.path.isdir("/dev/shm"):
                covers.append(("/dev/shm", f"size={max(1, self.policy.tmp_size_mb)}m,mode=1777"))
        for path, opts in sorted(covers, key=lambda c: c[0].count("/")):
            name = "private-tmp" if path in ("/tmp", "/dev/shm") else "hidden-dirs"
            try:
                os.makedirs(path, exist_ok=True)  # a hidden dir under an earlier cover: still an empty dir
            except OSError as e:
                self.log.miss(name, e)
                continue
            if self._step(name, _mount, "tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, opts) and name == "hidden-dirs":
                self.hidden_mounted.append(path)
        if self.tmp and "private-tmp" in self.log.mechanisms:
            self._step("private-tmp", self._tmp_dir)

    def _tmp_dir(self) -> None:
        os.makedirs(self.tmp, exist_ok=True)
        if not _under(self.tmp, "/tmp"):
            _mount("/tmp", self.tmp, None, MS_BIND)
        os.environ["TMPDIR"] = self.tmp
        tempfile.tempdir = None  # forget a cached gettempdir()
        self.exempt += ["/tmp", self.tmp]

    def _bind_writable(self, path: str, fd: int) -> None:
        here = os.stat(path) if os.path.isdir(path) else None
        there = os.fstat(fd)
        if here is not None and (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino):
            _mount(path, path, None, MS_BIND | MS_REC)  # its own mount, left writable below
        else:  # under a cover: bring the real directory back
            os.makedirs(path, exist_ok=True)
            _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)

    def _readonly_root(self) -> None:
        forced = []
        for path in _PROC_READONLY:
            if os.path.exists(path):
                try:
                    _mount(path, path, None, MS_BIND | MS_REC)
                    forced.append(path)
                except OSError as e:
                    self.log.miss("ro-root", f"{path} stays writable: {_why(e)}")
        root_ok, failed = False, []
        for point in _mount_points():
            if point not in forced and any(_under(point, e) for e in self.exempt):
                continue
            try:
                flags = MS_REMOUNT | MS_BIND | MS_RDONLY
                kept = os.statvfs(point).f_flag
                flags |= sum(ms for st, ms in _KEPT_FLAGS if kept & st)
                if not kept & (1024 | 4096):
                    flags |= MS_STRICTATIME
                _mount(None, point, None, flags)
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
    seen: dict[str, None] = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4])
            seen.setdefault(point, None)
    return list(seen)


def _set_rlimits(policy: SandboxPolicy, log: _Log) -> None:
    limits = [(resource.RLIMIT_FSIZE, policy.max_file_bytes), (resource.RLIMIT_NOFILE, policy.max_open_files),
              (resource.RLIMIT_CORE, 0)]
    if policy.max_address_space is not None:
        limits.append((resource.RLIMIT_AS, policy.max_address_space))
    ok = True
    for res, value in limits:
        try:
            hard = resource.getrlimit(res)[1]
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(res, (value, value))
        except (OSError, ValueError) as e:
            ok = False
            log.miss("rlimits", f"resource {res}: {e}")
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    if ok:
        log.ok("rlimits")


def _drop_privileges(log: _Log) -> None:
    """No way back: the mounts above cannot be undone without CAP_SYS_ADMIN."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        try:
            _prctl(PR_CAPBSET_DROP, cap)
        except OSError:
            break  # EINVAL: past the last cap; EPERM: no CAP_SETPCAP, hence no caps (no-new-privs covers exec)
    try:
        _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    except OSError:
        pass  # kernels before 4.3 have no ambient set
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    try:
        _check(_libc.capset(header, data), "capset")
        log.ok("no-caps")
    except OSError as e:
        log.miss("no-caps", e)
    try:
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
        log.ok("no-new-privs")
    except OSError as e:
        log.miss("no-new-privs", e)


# ---- capabilities -------------------------------------------------------------------------------------

_probed: dict[tuple[int, SandboxPolicy], SandboxReport] = {}


def capabilities(policy: SandboxPolicy, timeout_s: float = 10.0) -> SandboxReport:
    """What `enter(policy)` achieves here, found by entering in a throwaway forked child. Cached per
    process and policy; never raises."""
    key = (os.getpid(), policy)
    if key not in _probed:
        try:
            _probed[key] = _probe(policy, timeout_s)
        except Exception as e:  # noqa: BLE001 - a probe must never take the caller down
            _probed[key] = SandboxReport((), (f"probe: {type(e).__name__}: {e}",))
    return _probed[key]


def _probe(policy: SandboxPolicy, timeout_s: float) -> SandboxReport:
    r, w = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # "multi-threaded, fork() may deadlock": bounded below
        pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            rep = enter(policy)
            os.write(w, json.dumps([rep.mechanisms, rep.missing]).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    chunks, deadline = [], time.monotonic() + timeout_s
    try:
        while (left := deadline - time.monotonic()) > 0 and select.select([r], [], [], left)[0]:
            chunk = os.read(r, 65536)
            if not chunk:
                break
            chunks.append(chunk)
        else:
            os.kill(pid, signal.SIGKILL)
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    if not chunks:
        return SandboxReport((), (f"probe: the probe child gave no report within {timeout_s:g}s",))
    mechanisms, missing = json.loads(b"".join(chunks))
    return SandboxReport(tuple(mechanisms), tuple(missing))
