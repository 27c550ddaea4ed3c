"""Getting out of the runner's sandbox through what a runner inherits or shares with the host rather than
through the filesystem or the network: the server's working directory, System V and POSIX IPC objects that
outlive a runner, system calls that make a Unix socket without socket(), and credentials in environment
variables whose prefix CUDA, torch or Triton use. Expected: the attack learns or leaves nothing (the
candidate raises what it found, and the result must not contain the secret), and the canary still passes.

The judge here is created the way a careless server is run: from inside its data directory, with API
tokens in its environment under prefixes the runners are allowed."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Evaluation, Verdict
from tests.redteam.conftest import assert_readable, canary, evaluate, redteam_settings, summary
from tests.test_judge_cases import candidate

SECRETS = {"NVIDIA_API_KEY": "sekrit-nvidia-key", "TORCH_HUB_TOKEN": "sekrit-hub-token",
           "CUDA_AUTH_TOKEN": "sekrit-cuda-auth", "TRITON_Session_Cookie": "sekrit-triton-cookie",
           "PYTORCH_PASSWD": "sekrit-pytorch-passwd"}
SECRET_FILE = f"rt-cwd-secret-{uuid.uuid4().hex[:8]}.txt"
PRELUDE = '''
import ctypes
import ctypes.util
import errno
import os
import socket

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.shmget.restype = ctypes.c_int
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
librt = ctypes.CDLL(ctypes.util.find_library("rt") or None, use_errno=True)


def err():
    return errno.errorcode.get(ctypes.get_errno(), "?")


def attempt(fn):
    try:
        return fn()
    except OSError as e:
        return errno.errorcode.get(e.errno or 0, repr(e))
'''


@pytest.fixture(scope="module")
def judge(rt_root: Path) -> Iterator[Judge]:
    """Started from its data dir, with secrets under allowed prefixes; the cwd stays there throughout."""
    home = rt_root / "home"
    home.mkdir(parents=True, exist_ok=True)
    (home / SECRET_FILE).write_text("sekrit-in-the-data-dir\n")
    before = os.getcwd()
    with pytest.MonkeyPatch.context() as mp:
        for name, value in SECRETS.items():
            mp.setenv(name, value)
        os.chdir(home)
        try:
            j = Judge(redteam_settings(rt_root))
            j.start(wait=True)
            yield j
            j.close()
        finally:
            os.chdir(before)


def attack(body: str) -> str:
    return candidate("\n".join("        " + ln for ln in body.strip("\n").splitlines()), extra=PRELUDE)


def learned(ev: Evaluation) -> str:
    """The candidate's report of what it found, as any caller of the judge would see it."""
    assert_readable(ev)
    assert ev.verdict == Verdict.runtime_error, summary(ev)
    return ev.model_dump_json()


# -- the working directory -------------------------------------------------------------------------------------

def test_the_servers_working_directory_is_not_the_runners(judge: Judge) -> None:
    body = f'''
seen = {{"cwd": os.getcwd(), "proc": attempt(lambda: os.readlink("/proc/self/cwd"))}}
for where in (".", "..", "/proc/self/cwd", "/proc/1/cwd"):
    seen[where] = attempt(lambda: sorted(os.listdir(where)))
for path in ({SECRET_FILE!r}, "/proc/self/cwd/{SECRET_FILE}", "../home/{SECRET_FILE}"):
    seen[path] = attempt(lambda: open(path).read())
seen["write"] = attempt(lambda: open("rt-cwd-pwned", "w").write("x"))
raise RuntimeError(f"SAW {{seen}}")
'''
    ev = evaluate(judge, attack(body))
    canary(judge)
    text = learned(ev)
    assert "sekrit" not in text and SECRET_FILE not in text, summary(ev)
    assert "'cwd': '/'" in text, summary(ev)
    assert not (judge.settings.home / "rt-cwd-pwned").exists()


# -- Unix sockets without socket() -----------------------------------------------------------------------------

def test_socketpair_and_io_uring_are_refused(judge: Judge) -> None:
    body = '''
got = {"socket": attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) and "ok")}
got["socketpair"] = attempt(lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM) and "ok")
params = ctypes.create_string_buffer(120)
got["io_uring_setup"] = "ok" if libc.syscall(425, ctypes.c_uint(4), params) >= 0 else err()
got["io_uring_enter"] = "ok" if libc.syscall(426, -1, 0, 0, 0, None, 0) >= 0 else err()
raise RuntimeError(f"GOT {got}")
'''
    ev = evaluate(judge, attack(body))
    canary(judge)
    if "seccomp" not in ev.sandbox:
        pytest.skip(f"no seccomp filter on this host ({ev.sandbox})")
    text = learned(ev)
    for call in ("socket", "socketpair", "io_uring_setup", "io_uring_enter"):
        assert f"'{call}': 'EACCES'" in text, summary(ev)


# -- IPC objects that outlive the runner -----------------------------------------------------------------------

def _host_has_sysv_ipc() -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    shmid = libc.shmget(0, 4096, 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT
    if shmid < 0:
        return False
    libc.shmctl(shmid, 0, None)  # IPC_RMID
    return True


def _remove_from_host(key: int, queue: bytes) -> list[str]:
    """What the attack left on the host (removed now): an IPC namespace of the runner's own leaves nothing."""
    libc = ctypes.CDLL(None, use_errno=True)
    librt = ctypes.CDLL(ctypes.util.find_library("rt") or None, use_errno=True)
    left = []
    shmid = libc.shmget(key, 0, 0)
    if shmid >= 0:
        left.append("shm")
        libc.shmctl(shmid, 0, None)
    if librt.mq_unlink(queue) == 0:
        left.append("mqueue")
    return left


def test_shared_memory_and_message_queues_do_not_outlive_the_runner(judge: Judge) -> None:
    if not _host_has_sysv_ipc():
        pytest.skip("no System V IPC on this host")
    key, queue = 0x52540000 + uuid.uuid4().int % 0xFFFF, f"/rt-escape-{uuid.uuid4().hex[:8]}".encode()
    write = f'''
got = {{"shm": libc.shmget({key}, 4096, 0o1000 | 0o666)}}
if got["shm"] >= 0:
    ctypes.memmove(libc.shmat(got["shm"], None, 0), b"note from A\\0", 12)
q = librt.mq_open({queue!r}, os.O_CREAT | os.O_WRONLY, 0o666, None)
got["mq"] = librt.mq_send(q, b"note from A", 11, 0) if q >= 0 else err()
raise RuntimeError(f"WROTE {{got}}")
'''
    read = f'''
got = {{"shm": libc.shmget({key}, 0, 0)}}
got["shm"] = ctypes.string_at(libc.shmat(got["shm"], None, 0), 12) if got["shm"] >= 0 else err()
q = librt.mq_open({queue!r}, os.O_RDONLY | os.O_NONBLOCK)
buf = ctypes.create_string_buffer(8192)
got["mq"] = buf.raw[:max(0, librt.mq_receive(q, buf, 8192, None))] if q >= 0 else err()
raise RuntimeError(f"READ {{got}}")
'''
    try:
        wrote = evaluate(judge, attack(write))
        ev = evaluate(judge, attack(read))
    finally:
        left = _remove_from_host(key, queue)
    canary(judge)
    if "namespaces" not in ev.sandbox:
        pytest.skip(f"no namespaces on this host ({ev.sandbox})")
    assert "'mq': 0" in learned(wrote), f"the writer could not write: {summary(wrote)}"
    text = learned(ev)
    assert "note from A" not in text, f"the next candidate read it: {summary(ev)} (writer: {summary(wrote)})"
    assert "'shm': 'ENOENT'" in text and "'mq': 'ENOENT'" in text, f"{summary(ev)} (writer: {summary(wrote)})"
    assert not left, f"left on the host: {left}"


# -- environment variables -------------------------------------------------------------------------------------

def test_credentials_under_allowed_prefixes_never_reach_the_candidate(judge: Judge) -> None:
    ev = evaluate(judge, attack('raise RuntimeError(f"ENV {dict(os.environ)}")'))
    canary(judge)
    text = learned(ev)
    for name, value in SECRETS.items():
        assert value not in text and name not in text, summary(ev)
    assert "TRITON_INTERPRET" in text, "the variables Triton needs must still be passed"
