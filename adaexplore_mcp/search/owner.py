"""Who holds a claim on a step: a process, named so that another process can tell whether it still runs.

A claim (a step being evaluated) records its owner's pid, the process start time (field 22 of
/proc/<pid>/stat, clock ticks after boot) and where that pid means something (host name and pid
namespace, plus the boot id). Another server process on the same data directory then frees the claim
as soon as its owner is gone: no such pid, a zombie, or the pid now names a different process (reused:
the start time differs), or the machine rebooted since. When it cannot tell (a claim made on another
host or in another container, or a platform without /proc), it answers None and the caller falls back
on the claim timeout.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

_PROC = "/proc"


@dataclass(frozen=True)
class ProcessIdentity:
    pid: int
    start: int | None  # /proc/<pid>/stat field 22; None where /proc is unavailable
    host: str  # host name and pid namespace: a pid is only meaningful there
    boot: str  # boot id: a pid of an earlier boot names nothing now


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def _stat_fields(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/<pid>/stat (after the command name, which may hold spaces and parentheses)."""
    text = _read(f"{_PROC}/{pid}/stat")
    if not text or ")" not in text:
        return None
    return text[text.rindex(")") + 1:].split()


def start_time(pid: int) -> int | None:
    """The process start time (clock ticks after boot, /proc/<pid>/stat field 22), None when unknown."""
    fields = _stat_fields(pid)
    try:
        return int(fields[19]) if fields else None  # fields[0] is field 3 (state), so field 22 is fields[19]
    except (IndexError, ValueError):
        return None


def _host() -> str:
    try:
        namespace = os.readlink(f"{_PROC}/self/ns/pid")
    except OSError:
        namespace = ""
    return f"{socket.gethostname()}|{namespace}"


def _boot() -> str:
    return (_read(f"{_PROC}/sys/kernel/random/boot_id") or "").strip()


_CACHE: dict[int, ProcessIdentity] = {}


def current() -> ProcessIdentity:
    """This process (recomputed after a fork: keyed by pid)."""
    pid = os.getpid()
    identity = _CACHE.get(pid)
    if identity is None:
        identity = _CACHE[pid] = ProcessIdentity(pid=pid, start=start_time(pid), host=_host(), boot=_boot())
    return identity


def is_alive(pid: int | None, start: int | None, host: str | None, boot: str | None) -> bool | None:
    """Whether the process that recorded (pid, start, host, boot) still runs: True, False, or None when
    this process cannot tell (no pid recorded, or recorded on another host or in another pid namespace)."""
    if not isinstance(pid, int) or pid <= 0:
        return None
    me = current()
    if (host or "") != me.host:
        return None
    if boot and me.boot and boot != me.boot:
        return False  # recorded before this machine last booted
    if pid == me.pid:
        return start is None or me.start is None or start == me.start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    except (OSError, OverflowError):
        return None
    fields = _stat_fields(pid)
    if fields is None:
        return True  # it exists; no /proc to say more
    if fields and fields[0] in ("Z", "X"):
        return False  # a zombie: dead, not yet reaped by its parent
    now = start_time(pid)
    if start is not None and now is not None and now != start:
        return False  # the pid was reused by another process
    return True


__all__ = ["ProcessIdentity", "current", "is_alive", "start_time"]
