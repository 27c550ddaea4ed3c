"""Getting out of the runner's sandbox: signalling the judge, reading other processes' secrets, writing
the judge's store or the disk, reaching the network, leaving processes behind, exhausting memory or time.
Expected: the attack fails (a readable verdict, or a pass when the candidate swallowed its failure and
computed the answer), nothing outside the sandbox changes, and the judge keeps working (canary)."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Verdict
from tests.redteam.conftest import (
    assert_readable, canary, evaluate, gap, redteam_settings, summary,
)
from tests.test_judge_cases import candidate

SECRETS = {"ADAEXPLORE_TOKEN": "sekrit-adaexplore-token", "OPENAI_API_KEY": "sekrit-openai-key",
           "AWS_SECRET_ACCESS_KEY": "sekrit-aws-key"}
ESCAPE = '''
import ctypes
import os
import signal
import socket
import subprocess
import time


def in_pid_namespace():
    return os.getpid() == 1


def hunt_secrets():
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() or name in ("self", "thread-self"):
            for what in ("environ", "cmdline"):
                try:
                    data = open(f"/proc/{name}/{what}", "rb").read()
                except OSError:
                    continue
                if b"sekrit" in data:
                    found.append(f"/proc/{name}/{what}")
    found += [k for k, v in os.environ.items() if "sekrit" in v]
    return found
'''


@pytest.fixture(scope="module")
def judge(rt_root: Path) -> Iterator[Judge]:
    """The judge is created with secrets in the environment, as a server holding API tokens would be."""
    saved = {k: os.environ.get(k) for k in SECRETS}
    os.environ.update(SECRETS)
    try:
        j = Judge(redteam_settings(rt_root))
        j.start(wait=True)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    yield j
    j.close()


def escape(body: str, init: str = "") -> str:
    return candidate(body, extra=ESCAPE, init=init)


def no_secret_in(ev) -> None:
    text = ev.model_dump_json()
    for value in SECRETS.values():
        assert value not in text, f"secret leaked into the result: {summary(ev)}"
    assert "sekrit" not in text, summary(ev)


def processes_with(marker: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(pid)
            except OSError:
                pass
    return found


# -- signals -----------------------------------------------------------------------------------------------

def test_killing_the_parent_is_a_crash_of_the_candidate_only(judge: Judge) -> None:
    ev = evaluate(judge, escape("        os.kill(os.getppid(), signal.SIGKILL)\n        return affine(x)"))
    canary(judge)
    assert_readable(ev)
    assert ev.verdict in (Verdict.crashed, Verdict.runtime_error), summary(ev)


def test_killing_every_visible_process_reaches_only_the_sandbox(judge: Judge) -> None:
    body = ("        if not in_pid_namespace():\n            raise RuntimeError('no pid namespace: not attempted')\n"
            "        for name in os.listdir('/proc'):\n            if name.isdigit() and int(name) != os.getpid():\n"
            "                try:\n                    os.kill(int(name), signal.SIGKILL)\n"
            "                except OSError:\n                    pass\n        return affine(x)")
    ev = evaluate(judge, escape(body))
    if ev.error is not None and "not attempted" in ev.error.message:
        pytest.skip("no pid namespace here: killing every visible process would hit the host")
    canary(judge)
    assert_readable(ev)


def test_kill_minus_one_reaches_only_the_sandbox(judge: Judge) -> None:
    body = ("        if not in_pid_namespace():\n            raise RuntimeError('no pid namespace: not attempted')\n"
            "        try:\n            os.kill(-1, signal.SIGKILL)\n        except OSError:\n            pass\n"
            "        return affine(x)")
    ev = evaluate(judge, escape(body))
    if ev.error is not None and "not attempted" in ev.error.message:
        pytest.skip("no pid namespace here: kill(-1) would hit the host")
    canary(judge)
    assert_readable(ev)


# -- secrets -------------------------------------------------------------------------------------------------

def test_secrets_in_the_servers_environment_never_reach_the_candidate(judge: Judge) -> None:
    body = ("        found = hunt_secrets()\n        if found:\n            raise RuntimeError(f'LEAK {found}')\n"
            "        return affine(x)")
    ev = evaluate(judge, escape(body))
    canary(judge)
    no_secret_in(ev)
    assert ev.verdict == Verdict.passed, summary(ev)


def test_secrets_cannot_be_exfiltrated_through_the_error_message(judge: Judge) -> None:
    body = ("        blobs = []\n        for name in os.listdir('/proc'):\n            try:\n"
            "                blobs.append(open(f'/proc/{name}/environ', 'rb').read().decode(errors='replace'))\n"
            "            except OSError:\n                pass\n"
            "        raise RuntimeError(' '.join(blobs) + ' ' + repr(dict(os.environ)))")
    ev = evaluate(judge, escape(body))
    canary(judge)
    assert_readable(ev)
    no_secret_in(ev)


# -- the judge's data dir and the disk -----------------------------------------------------------------------

def test_the_store_under_the_data_dir_can_be_neither_read_nor_written(judge: Judge) -> None:
    db = judge.settings.db_path
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE IF NOT EXISTS evaluations (verdict TEXT)")
    con.execute("INSERT INTO evaluations VALUES ('mismatch')")
    con.commit()
    con.close()
    before = db.read_bytes()
    body = (f"        import sqlite3\n        home, db = {str(judge.settings.home)!r}, {str(db)!r}\n"
            "        seen = os.listdir(home)\n"
            "        wrote = []\n"
            "        try:\n            con = sqlite3.connect(db)\n"
            "            con.execute(\"UPDATE evaluations SET verdict = 'passed'\")\n"
            "            con.execute('CREATE TABLE pwned (x)')\n            con.commit()\n"
            "            wrote.append('db')\n"
            "        except Exception:\n            pass\n"
            "        for path in (home + '/pwned', home + '/logs/pwned', home + '/kernels/pwned'):\n"
            "            try:\n                open(path, 'w').write('x')\n                wrote.append(path)\n"
            "            except OSError:\n                pass\n"
            "        try:\n            ctypes.CDLL(None, use_errno=True).umount2(home.encode(), 2)\n"
            "            seen += os.listdir(home)\n        except OSError:\n            pass\n"
            "        if seen or wrote:\n            raise RuntimeError(f'SAW {seen} WROTE {wrote}')\n"
            "        return affine(x)")
    ev = evaluate(judge, escape(body))
    canary(judge)
    assert ev.verdict == Verdict.passed, summary(ev)
    assert db.read_bytes() == before
    assert not any(p.name == "pwned" for p in judge.settings.home.rglob("*"))


@pytest.mark.parametrize("where", ["os.environ['TMPDIR']", "'/tmp'", "'/var/tmp'", "'/dev/shm'"],
                         ids=["private_tmpdir", "host_tmp", "host_var_tmp", "dev_shm"])
def test_a_one_gigabyte_file_is_refused(judge: Judge, where: str) -> None:
    body = (f"        path = os.path.join({where}, 'rt-big')\n"
            "        with open(path, 'wb') as f:\n            for _ in range(1024):\n"
            "                f.write(b'z' * (1 << 20))\n        return affine(x)")
    ev = evaluate(judge, escape(body))
    canary(judge)
    assert_readable(ev)
    assert ev.verdict == Verdict.runtime_error, summary(ev)
    assert not Path("/var/tmp/rt-big").exists() and not Path("/tmp/rt-big").exists()


def test_files_outside_the_data_dir_cannot_be_read_and_sent_back(judge: Judge, rt_root: Path) -> None:
    secret = rt_root / "not-the-data-dir" / "credentials"
    secret.parent.mkdir(parents=True, exist_ok=True)
    secret.write_text("[default]\naws_secret_access_key = sekrit-on-disk\n")
    body = f"        raise RuntimeError(open({str(secret)!r}).read())"
    ev = evaluate(judge, escape(body))
    canary(judge)
    assert_readable(ev)
    no_secret_in(ev)


def _disk_usage(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def test_the_disk_cannot_be_filled_through_the_writable_cache_dir(judge: Judge) -> None:
    cache = Path(judge.settings.cache_dir)
    body = ("        d = os.environ['TRITON_CACHE_DIR']\n        os.makedirs(d, exist_ok=True)\n"
            "        if not hasattr(self, 'done'):\n            self.done = True\n            for i in range(8):\n"
            "                try:\n                    with open(f'{d}/fill{i}', 'wb') as f:\n"
            "                        for _ in range(50):\n                            f.write(b'z' * (1 << 20))\n"
            "                except OSError:\n                    break\n        return affine(x)")
    try:
        ev = evaluate(judge, escape(body))
        canary(judge)
        assert_readable(ev)
        used = _disk_usage(cache)
        assert used < 256 << 20, f"one candidate left {used >> 20} MB on the host's disk ({cache})"
    finally:
        for p in cache.rglob("fill*"):
            p.unlink()


# -- the network -----------------------------------------------------------------------------------------------

def _accepted(server: socket.socket) -> bytes | None:
    server.settimeout(0.2)
    try:
        conn, _ = server.accept()
    except (TimeoutError, BlockingIOError, socket.timeout):
        return None
    with conn:
        conn.settimeout(0.5)
        try:
            return conn.recv(64) or b"(connected)"
        except OSError:
            return b"(connected)"


def _connect_and_send(family: str, address: str) -> str:
    return (f"        try:\n            s = socket.socket({family})\n            s.settimeout(1)\n"
            f"            s.connect({address})\n            s.sendall(b'pwned')\n        except OSError:\n"
            "            pass\n        return affine(x)")


def test_a_tcp_listener_on_localhost_cannot_be_reached(judge: Judge) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        ev = evaluate(judge, escape(_connect_and_send("", repr(server.getsockname()))))
        got = _accepted(server)
    canary(judge)
    assert got is None, f"the candidate reached 127.0.0.1 and sent {got!r}"
    assert ev.verdict == Verdict.passed, summary(ev)


def test_a_udp_datagram_to_localhost_is_not_delivered(judge: Judge) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as server:
        server.bind(("127.0.0.1", 0))
        body = (f"        try:\n            socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'pwned', "
                f"{server.getsockname()!r})\n        except OSError:\n            pass\n        return affine(x)")
        ev = evaluate(judge, escape(body))
        server.settimeout(0.3)
        try:
            got = server.recv(64)
        except (TimeoutError, socket.timeout):
            got = None
    canary(judge)
    assert got is None and ev.verdict == Verdict.passed, (got, summary(ev))


def test_an_abstract_unix_socket_of_the_host_cannot_be_reached(judge: Judge) -> None:
    name = f"\0adaexplore-redteam-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(name)
        server.listen(8)
        ev = evaluate(judge, escape(_connect_and_send("socket.AF_UNIX", repr(name))))
        got = _accepted(server)
    canary(judge)
    assert got is None, f"the candidate reached the host's abstract socket and sent {got!r}"
    assert ev.verdict == Verdict.passed, summary(ev)


def test_a_unix_socket_on_the_hosts_filesystem_cannot_be_reached(judge: Judge, rt_root: Path) -> None:
    path = rt_root / f"listener-{uuid.uuid4().hex[:8]}.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        server.listen(8)
        ev = evaluate(judge, escape(_connect_and_send("socket.AF_UNIX", repr(str(path)))))
        got = _accepted(server)
    canary(judge)
    assert_readable(ev)
    assert got is None, f"the candidate reached {path} and sent {got!r}"


# -- processes left behind -------------------------------------------------------------------------------------

STARTERS = {
    # a process group of its own (a new session is refused by the filter since round ten: under the kernel's
    # autogroup, each one was a scheduling group that took the CPU from other evaluations)
    "popen": "subprocess.Popen(['sleep', '{marker}'], process_group=0)",
    "double_fork_own_group": ("(os.fork() == 0) and (os.setpgid(0, 0), os.fork() == 0 and os.execvp('sleep', "
                              "['sleep', '{marker}']), os._exit(0))"),
    "fork_ignoring_signals": ("(os.fork() == 0) and (signal.signal(signal.SIGHUP, signal.SIG_IGN), "
                              "signal.signal(signal.SIGTERM, signal.SIG_IGN), "
                              "os.execvp('sleep', ['sleep', '{marker}']))"),
    # pid 1 itself stays: its death signal disarmed (refused by the filter), and the judge's last os._exit made
    # an exec of a sleep (red team, round 4: it outlived the relay's kill and the judge)
    "disarm_death_signal": ("(ctypes.CDLL(None).prctl(1, 0, 0, 0, 0), "
                            "setattr(os, '_exit', lambda *a: os.execvp('sleep', ['sleep', '{marker}'])))"),
}


def _starter(how: str) -> tuple[str, str]:
    marker = f"{600 + uuid.uuid4().int % 100}.{uuid.uuid4().int % 10**9:09d}"  # a sleep of at most ~700 s
    start = STARTERS[how].format(marker=marker)
    body = f"        if not hasattr(self, 'started'):\n            self.started = {start}\n        return affine(x)"
    return marker, escape(body)


def _survivors(marker: str) -> list[str]:
    deadline = time.monotonic() + 5
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    found = processes_with(marker)
    for pid in found:  # never leave them behind, whatever the verdict
        try:
            os.kill(int(pid), signal.SIGKILL)
        except OSError:
            pass
    return found


@pytest.mark.parametrize("how", list(STARTERS))
def test_no_process_the_candidate_starts_survives_it(judge: Judge, how: str) -> None:
    marker, source = _starter(how)
    ev = evaluate(judge, source)
    survivors = _survivors(marker)
    canary(judge)
    assert ev.verdict == Verdict.passed, summary(ev)
    assert not survivors, f"processes started by the candidate survived it: {survivors}"


def test_control_without_the_sandbox_a_started_process_survives() -> None:
    """Positive control: the survivor scan above does see a process left behind when nothing stops it."""
    import dataclasses
    import shutil

    from tests.redteam.conftest import scratch_root

    root = scratch_root()
    try:
        with Judge(dataclasses.replace(redteam_settings(root), sandbox="off")) as unsandboxed:
            marker, source = _starter("double_fork_own_group")  # a grandchild: killing the runner's children misses it
            ev = evaluate(unsandboxed, source)
            survivors = _survivors(marker)
        assert ev.verdict == Verdict.passed and survivors, summary(ev)
    finally:
        shutil.rmtree(root, ignore_errors=True)


# -- resources ---------------------------------------------------------------------------------------------------

def test_allocating_without_limit_is_an_error_not_a_hang(judge: Judge) -> None:
    """Untouched allocations (torch.empty) until the address-space limit: no real memory is used."""
    body = ("        keep = []\n        for _ in range(64):\n"
            "            keep.append(torch.empty(1 << 31, dtype=torch.uint8))\n        return affine(x)")
    ev = evaluate(judge, escape(body), timeout_s=60)
    canary(judge)
    assert_readable(ev)
    assert ev.verdict in (Verdict.runtime_error, Verdict.crashed), summary(ev)


@pytest.mark.parametrize("loop", [
    "        while True:\n            pass",
    "        signal.signal(signal.SIGTERM, signal.SIG_IGN)\n        signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "        while True:\n            time.sleep(1)",
    "        import threading\n        threading.Event().wait()",
], ids=["busy", "ignoring_signals", "blocked_forever"])
def test_an_endless_forward_is_a_timeout(judge: Judge, loop: str) -> None:
    ev = evaluate(judge, escape(loop), timeout_s=4)
    canary(judge)
    assert ev.verdict == Verdict.timeout, summary(ev)
    assert ev.duration_s < 30, ev.duration_s


def test_an_endless_import_is_a_timeout(judge: Judge) -> None:
    ev = evaluate(judge, "while True:\n    pass\n" + escape("        return affine(x)"), timeout_s=4)
    canary(judge)
    assert ev.verdict == Verdict.timeout, summary(ev)
