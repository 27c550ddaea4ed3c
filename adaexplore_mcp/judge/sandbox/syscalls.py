"""The Linux system calls the runner sandbox makes (core.py, mounts.py), through libc with ctypes,
and the log of what each step applied or missed. Nothing here decides a policy."""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x10000000, 0x20000000, 0x40000000
CLONE_NEWIPC = 0x08000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 8, 32, 4096, 16384
MS_PRIVATE, MS_RELATIME, MS_STRICTATIME = 1 << 18, 1 << 21, 1 << 24
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 1, 24, 38, 47, 4
MNT_DETACH = 2


class Log:
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


LINUX = sys.platform.startswith("linux")
libc = ctypes.CDLL(None, use_errno=True) if LINUX else None
if libc is not None:
    libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
    libc.unshare.argtypes = [ctypes.c_int]
    libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
    libc.capset.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]


def check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), what)


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    b = [None if s is None else os.fsencode(s) for s in (source, target, fstype, data)]
    check(libc.mount(b[0], b[1], b[2], flags, b[3]), target)


def detach(target: str) -> None:
    """umount2(MNT_DETACH): the mount and everything mounted under it go; what it covered shows again."""
    check(libc.umount2(os.fsencode(target), MNT_DETACH), target)


def prctl(option: int, arg: int = 0) -> None:
    check(libc.prctl(option, arg, 0, 0, 0), f"prctl({option})")


def unshare(flag: int) -> None:
    names = {CLONE_NEWUSER: "CLONE_NEWUSER", CLONE_NEWNS: "CLONE_NEWNS", CLONE_NEWPID: "CLONE_NEWPID",
             CLONE_NEWIPC: "CLONE_NEWIPC"}
    check(libc.unshare(flag), f"unshare({names.get(flag, 'CLONE_NEWNET')})")
