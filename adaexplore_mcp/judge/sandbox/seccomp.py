"""A seccomp filter that refuses `socket(AF_UNIX, ...)` in a runner (EACCES), through libc (ctypes).

Why: the mount namespace makes the host's filesystem read-only, but `connect()` to a Unix socket needs no write
permission, so a candidate could talk to any daemon whose socket it can see (a container engine, a desktop bus,
another server). The network namespace already covers IP and abstract sockets. `socket(AF_VSOCK, ...)` is
refused too: network namespaces do not cover vsock, a way to the hypervisor and its agents on a virtual machine. The
other ways to a Unix socket are refused outright (EACCES too): `socketpair()` (a
datagram pair can `sendto()` any socket path), io_uring (`IORING_OP_SOCKET` makes a socket without the socket
call, and its requests are not seen by seccomp at all), and the kernel keyrings (`add_key`, `keyctl`: a user's
keyring is shared with the host when no user namespace is made, and outlives the runner). Nothing a runner needs
makes any of them: its one socket is inherited. `prctl(PR_SET_PDEATHSIG)` is refused too: the sandbox arms it
before the filter, and nothing after may disarm it. So are the loop devices' ioctls: where the private /dev cannot
be made a root runner sees the host's, and a loop device it attaches is shared with every later runner and
outlives the judge. And file leases (`fcntl(F_SETLEASE)`), which let a root runner hold others' open() of the
files it owns, and space reserved past a file's end (`fallocate` with KEEP_SIZE), which the file size limit
does not see. And `setsid()` (the sandbox's own comes before the filter): on a host with the kernel's
autogroup, every new session is a scheduling group of its own, and a candidate whose 200 children each made one
took the CPU from the other workers' evaluations until an honest one timed out; and
`inotify_init`, `inotify_init1`, `fanotify_init`, whose instances count per user, host-wide: a root runner held
all 128 of root's. The filter
also refuses every system call made through another ABI (32-bit x86, x32), the classic way around a filter that
checks call numbers of one ABI only.

Installed last, after PR_SET_NO_NEW_PRIVS (which a filter needs without CAP_SYS_ADMIN), while the runner
is still single-threaded: threads and children made later inherit it.
"""

from __future__ import annotations

import ctypes
import platform

PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000
EACCES, AF_UNIX, AF_VSOCK, PR_SET_PDEATHSIG = 13, 1, 40, 1
_LD_ABS, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_JMP|JGE|K, BPF_RET|K
_AND = 0x54  # BPF_ALU|BPF_AND|BPF_K
_NR_OFFSET, _ARCH_OFFSET, _ARG0_OFFSET, _ARG1_OFFSET = 0, 4, 16, 24  # struct seccomp_data (args' low halves)
_LOOP_IOCTLS = 0x4C00
_NR_IOCTL = {"x86_64": 16, "aarch64": 29}
_NR_FCNTL, F_SETLEASE = {"x86_64": 72, "aarch64": 25}, 1024
_NR_FALLOCATE, FALLOC_FL_KEEP_SIZE = {"x86_64": 285, "aarch64": 47}, 1
# machine -> (AUDIT_ARCH_*, __NR_socket, first call number of another ABI on the same arch, calls refused:
# socketpair, io_uring_setup, io_uring_enter, io_uring_register, add_key, request_key, keyctl, then setsid,
# inotify_init1, fanotify_init (and x86_64's inotify_init), __NR_prctl)
_ARCHES = {"x86_64": (0xC000003E, 41, 0x40000000, (53, 425, 426, 427, 248, 249, 250, 112, 294, 300, 253), 157),
           "aarch64": (0xC00000B7, 198, 0xFFFFFFFF, (199, 425, 426, 427, 217, 218, 219, 157, 26, 262), 167)}


class _Instr(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Instr))]


def program(arch: int, nr_socket: int, other_abi: int, refused: tuple[int, ...] = (),
            nr_prctl: int | None = None, nr_ioctl: int | None = None,
            nr_fcntl: int | None = None, nr_fallocate: int | None = None) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k); jumps count instructions skipped. ALLOW and DENY are the last two.

    Refused by first argument: socket(AF_UNIX, ...), and prctl(PR_SET_PDEATHSIG, ...) when `nr_prctl` is given:
    pid 1 of a runner's namespace dies with the relay that forked it only while its death signal stays armed
    (core.py); a candidate that disarmed it outlived its evaluation and the judge.
    Refused by second argument, when `nr_ioctl` is given: the loop devices' ioctls (0x4C00-0x4CFF, old-style
    numbers no other driver uses). A runner as root opens the host's /dev/loop-control: a candidate attached a
    file to a free loop device, which the next candidate read and which outlived the judge.
    And, when `nr_fcntl` is given, fcntl(F_SETLEASE): a root runner owns the installed Python files, and a write
    lease on one holds every other process's open() of it for 45 s (lease-break-time): an honest candidate on
    another worker timed out importing Triton. And, with `nr_fallocate`, fallocate with
    FALLOC_FL_KEEP_SIZE (or a hole punched, which needs it): blocks reserved past a file's end leave its size,
    which RLIMIT_FSIZE bounds, unchanged; through its log a runner filled the data directory's disk."""
    by_arg0 = [(nr_socket, (AF_UNIX, AF_VSOCK))] + ([(nr_prctl, (PR_SET_PDEATHSIG,))] if nr_prctl is not None else [])
    by_arg1 = ([(nr_ioctl, 0xFFFFFF00, _LOOP_IOCTLS)] if nr_ioctl is not None else []) + \
        ([(nr_fcntl, 0xFFFFFFFF, F_SETLEASE)] if nr_fcntl is not None else []) + \
        ([(nr_fallocate, FALLOC_FL_KEEP_SIZE, FALLOC_FL_KEEP_SIZE)] if nr_fallocate is not None else [])
    n = len(refused)
    length = 4 + n + 4 * len(by_arg1) + sum(2 + len(values) for _, values in by_arg0) + 2
    allow, deny = length - 2, length - 1
    prog = [(_LD_ABS, 0, 0, _ARCH_OFFSET), (_JEQ, 0, deny - 2, arch),  # another architecture's calls: DENY
            (_LD_ABS, 0, 0, _NR_OFFSET), (_JGE, deny - 4, 0, other_abi)]  # x32 calls: DENY
    prog += [(_JEQ, deny - (4 + i) - 1, 0, nr) for i, nr in enumerate(refused)]  # a call refused outright: DENY
    for nr, mask, value in by_arg1:  # this call, and its second argument (masked) is the value: DENY, else ALLOW
        here = len(prog)
        prog += [(_JEQ, 0, 3, nr), (_LD_ABS, 0, 0, _ARG1_OFFSET), (_AND, 0, 0, mask),
                 (_JEQ, deny - here - 4, allow - here - 4, value)]
    for j, (nr, values) in enumerate(by_arg0):  # the call numbers differ: once arg0 is loaded, no other pair applies
        here, k = len(prog), len(values)
        last = j == len(by_arg0) - 1
        prog += [(_JEQ, 0, allow - here - 1 if last else 1 + k, nr), (_LD_ABS, 0, 0, _ARG0_OFFSET)]
        for i, value in enumerate(values):  # arg0 one of the values: DENY; past the last: ALLOW
            at = here + 2 + i
            prog.append((_JEQ, deny - at - 1, allow - at - 1 if i == k - 1 else 0, value))
    return prog + [(_RET, 0, 0, SECCOMP_RET_ALLOW), (_RET, 0, 0, SECCOMP_RET_ERRNO | EACCES)]


def deny_unix_sockets(all_threads: bool = False) -> None:
    """Install the filter in this thread (and all it starts from now on), or with `all_threads` in every thread of
    the process (a runner whose CUDA context, made first, started threads of its own); raises OSError when it
    cannot."""
    machine = platform.machine()
    if machine not in _ARCHES:
        raise OSError(f"no seccomp filter for {machine}")
    install(program(*_ARCHES[machine], nr_ioctl=_NR_IOCTL[machine], nr_fcntl=_NR_FCNTL[machine],
                    nr_fallocate=_NR_FALLOCATE[machine]), all_threads)


_NR_SECCOMP = {"x86_64": 317, "aarch64": 277}
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC = 1, 1


def install(code: list[tuple[int, int, int, int]], all_threads: bool = False) -> None:
    """Install one filter program (`program`'s form) in this thread, or in all of them (seccomp(2) with TSYNC:
    every thread must already have no_new_privs, which the sandbox sets before anything starts a thread);
    raises OSError when it cannot."""
    instrs = (_Instr * len(code))(*[_Instr(*c) for c in code])
    prog = _Prog(len(code), ctypes.cast(instrs, ctypes.POINTER(_Instr)))
    libc = ctypes.CDLL(None, use_errno=True)
    if all_threads:
        libc.syscall.restype = ctypes.c_long
        ret = libc.syscall(ctypes.c_long(_NR_SECCOMP[platform.machine()]), ctypes.c_ulong(SECCOMP_SET_MODE_FILTER),
                           ctypes.c_ulong(SECCOMP_FILTER_FLAG_TSYNC), ctypes.byref(prog))
        if ret != 0:  # > 0: the id of a thread that could not be synchronized
            err = ctypes.get_errno() if ret < 0 else 0
            raise OSError(err, f"seccomp(TSYNC): {__import__('os').strerror(err) if ret < 0 else f'thread {ret}'}")
        return
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_SECCOMP): {__import__('os').strerror(err)}")
