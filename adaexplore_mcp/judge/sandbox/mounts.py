"""The runner sandbox's mount namespace (core.py says why each mount is there): hidden dirs covered, a private
/tmp, /dev/shm and /dev, the writable and visible dirs bound back, everything else read-only."""

from __future__ import annotations

import fnmatch
import os
import re
import stat
import tempfile
from typing import TYPE_CHECKING

from .syscalls import (
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_RELATIME,
    MS_REMOUNT,
    MS_STRICTATIME,
    Log,
    detach,
    mount,
)

if TYPE_CHECKING:
    from .core import SandboxPolicy

# statvfs f_flag bit -> the mount flag a bind remount must repeat (they are locked in a user namespace)
_KEPT_FLAGS = ((2, MS_NOSUID), (4, MS_NODEV), (8, MS_NOEXEC), (1024, 1024), (2048, 2048), (4096, MS_RELATIME))
_PROC_READONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs", "/proc/pressure")
# All a runner's /dev holds of the host's (globs): the pseudo devices any program may open and the GPU's nodes
# (NVIDIA's; /dev/dxg under WSL). Not disks, loop devices, /dev/kvm, /dev/mem or terminals: uid 0 passes their
# permission bits even without capabilities.
DEVICE_NODES = ("null", "zero", "full", "random", "urandom", "nvidia*", "nvidia-caps", "dxg")
_DEV_LINKS = (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
              ("stderr", "/proc/self/fd/2"))


class Mounts:
    """Everything done inside the new mount namespace, in order."""

    def __init__(self, policy: SandboxPolicy, log: Log) -> None:
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
        # regular files, dirs and links get EROFS), but new files no longer land in the host's devtmpfs (root
        # filled it). /dev/shm stays writable: the private one, or the host's on a GPU.
        self.exempt = ["/dev/shm", "/dev/pts", "/proc"] + self.writable + self.hidden

    def apply(self) -> None:
        log = self.log
        if not log.attempt("private-mounts", mount, None, "/", None, MS_REC | MS_PRIVATE):
            log.miss("mounts", "nothing mounted: it could propagate to the host")
            return
        if "pid-ns" in log.mechanisms:
            log.attempt("fresh-proc", mount, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        keep_host_shm = not (self.policy.private_shm and self.tmp)
        if self.policy.private_dev and log.attempt("private-dev", private_dev, keep_host_shm):
            self.exempt.append("/dev")  # read-only already; the host's mounts under /dev are out of sight
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
                log.attempt("visible-dirs", mount, None, path, None,
                            MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
            os.close(fd)
        for path in hidden:
            log.attempt("hidden-dirs", mount, None, path, None,
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
            if self.log.attempt(name, mount, "tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, opts) \
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
            mount(path, path, None, MS_BIND | MS_REC)  # a mount of its own, left writable below
        else:  # under a cover: bring the real directory back
            os.makedirs(path, exist_ok=True)
            mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)

    def _readonly_root(self) -> None:
        forced = [p for p in _PROC_READONLY if os.path.exists(p)
                  and self.log.attempt("ro-proc", mount, p, p, None, MS_BIND | MS_REC)]
        root_ok, failed = False, []
        for point in _mount_points():
            if point not in forced and any(_under(point, e) for e in self.exempt):
                continue
            try:
                kept = os.statvfs(point).f_flag
                flags = MS_REMOUNT | MS_BIND | MS_RDONLY | sum(ms for st, ms in _KEPT_FLAGS if kept & st)
                mount(None, point, None, flags | (0 if kept & (1024 | 4096) else MS_STRICTATIME))
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


def private_dev(keep_host_shm: bool) -> None:
    """A tmpfs over /dev holding the host's DEVICE_NODES (each bound into place), the usual links into /proc and
    /dev/shm: the host's bound back with `keep_host_shm` (CUDA IPC keeps its reference counters there), else an
    empty dir for the private tmpfs. Made read-only once filled. All or nothing: on a failure the tmpfs goes
    and the host's /dev shows again (made read-only with the rest)."""
    names = sorted({n for pattern in DEVICE_NODES for n in fnmatch.filter(os.listdir("/dev"), pattern)})
    names += ["shm"] if keep_host_shm and os.path.isdir("/dev/shm") else []
    fds: dict[str, int] = {}
    try:
        for name in names:  # opened before the tmpfs hides them
            fds[name] = os.open(f"/dev/{name}", os.O_PATH | os.O_NOFOLLOW)
        mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64k,mode=755")
        try:
            _fill_dev(fds)
            mount(None, "/dev", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
        except OSError:
            detach("/dev")
            raise
    finally:
        for fd in fds.values():
            os.close(fd)


def _fill_dev(fds: dict[str, int]) -> None:
    for name, fd in fds.items():
        path, mode = f"/dev/{name}", os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            os.mkdir(path)
        elif stat.S_ISCHR(mode):
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))  # a mount point for the node
        else:
            continue  # a link or a plain file: nothing a runner needs
        mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
    for name, target in _DEV_LINKS:
        os.symlink(target, f"/dev/{name}")
    if "shm" not in fds:
        os.mkdir("/dev/shm")
        os.chmod("/dev/shm", 0o1777)
