"""A hostile task reference: the task author's code is confined like a candidate's. It may kill its parent,
patch torch, fork, loop, exit or fail in ways hard to describe, from module level, get_inputs() or
forward(). Expected: `probe_task` answers (ok=False with a readable error, or ok=True when harmless),
never raises; an evaluation against it is a readable verdict; the judge stays usable (canary)."""

from __future__ import annotations

import os
import shutil
import time
import uuid

import pytest

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Verdict
from tests.redteam.conftest import (
    JUDGE_BUG, as_json, assert_readable, canary, evaluate, gap, redteam_settings, scratch_root, summary,
)
from tests.test_judge_cases import AFFINE_TASK, GOOD, candidate, task


def in_forward(body: str) -> str:
    return AFFINE_TASK.replace("        return x * 2 + 1", body)


def in_get_inputs(body: str) -> str:
    return AFFINE_TASK.replace("    return [torch.randn(N)]", body)


def at_import(prefix: str) -> str:
    return prefix + AFFINE_TASK


BAD_STR = "class BadStr(Exception):\n    def __str__(self):\n        raise ValueError('no str')\n"

HOSTILE = {  # name: (source, ok expected: True / False / None for either)
    # pid 1 of a pid namespace has no parent there (getppid() == 0: kill(0) signals its own process group),
    # and ignores default-action signals sent from inside: dying or surviving are both fine answers
    "kill_parent_in_forward": (in_forward("        import os, signal\n        os.kill(os.getppid(), signal.SIGKILL)\n"
                                          "        return x * 2 + 1"), None),
    "kill_parent_at_import": (at_import("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"), None),
    "kill_everything_visible": (at_import(
        "import os, signal\nif os.getpid() == 1:\n    for p in os.listdir('/proc'):\n"
        "        if p.isdigit() and int(p) != 1:\n            try:\n                os.kill(int(p), signal.SIGKILL)\n"
        "            except OSError:\n                pass\n"), None),
    "patch_torch_at_import": (at_import("import torch\ntorch.Tensor.__eq__ = lambda a, b: True\n"
                                        "torch.allclose = lambda *a, **k: True\n"), True),
    "endless_forward": (in_forward("        while True:\n            pass"), False),
    "endless_get_inputs": (in_get_inputs("    while True:\n        pass"), False),
    "endless_import": (at_import("while True:\n    pass\n"), False),
    "os_exit_at_import": (at_import("import os\nos._exit(0)\n"), False),
    "sys_exit_in_get_inputs": (in_get_inputs("    import sys\n    sys.exit(0)"), False),
    "keyboard_interrupt_in_forward": (in_forward("        raise KeyboardInterrupt"), False),
    "undescribable_exception_in_forward": (BAD_STR + in_forward("        raise BadStr()"), False),
    "surrogate_in_get_init_inputs": (AFFINE_TASK.replace("def get_init_inputs():\n    return []",
                                                         "def get_init_inputs():\n    raise RuntimeError('\\ud800')"),
                                     False),
    "ten_megabyte_error": (in_forward("        raise RuntimeError('m' * (10 << 20))"), False),
    "non_tensor_output": (in_forward("        return {'a': 1}"), False),
    "get_inputs_not_a_list": (in_get_inputs("    return object()"), False),
    "huge_init_inputs": (AFFINE_TASK.replace("def get_init_inputs():\n    return []",
                                             "def get_init_inputs():\n    return ['x' * (10 << 20)]"), None),
    "allocates_without_limit": (at_import("import torch\n_keep = [torch.empty(1 << 31, dtype=torch.uint8) "
                                          "for _ in range(64)]\n"), False),
    "reads_secrets": (at_import("import os\n_env = [open(f'/proc/{p}/environ', 'rb').read()\n"
                                "        for p in os.listdir('/proc') if p.isdigit()]\n"
                                "if any(b'sekrit' in e for e in _env):\n"
                                "    raise RuntimeError(repr(_env))\n"), True),
}


@pytest.mark.parametrize("source,ok", list(HOSTILE.values()), ids=list(HOSTILE))
def test_probing_a_hostile_reference_is_an_answer(judge: Judge, source: str, ok: bool | None) -> None:
    try:
        probe = judge.probe_task(task(source, name="hostile"), timeout_s=4)
    except Exception as exc:  # noqa: BLE001
        raise AssertionError(f"probe_task raised {type(exc).__name__}: {str(exc)[:1000]}") from exc
    canary(judge)
    text = as_json(probe)
    assert JUDGE_BUG not in text, text[:1000]
    if ok is not None:
        assert probe.ok is ok, text[:1000]
    if not probe.ok:
        assert probe.error and probe.error.strip(), text[:1000]
        assert len(probe.error) < 5000, len(probe.error)


# Found by this corpus (fixed in 20abbb8): evaluate() did not check the reference's outputs as probe does; a
# reference returning a non-tensor reached compare() (AttributeError: 'a bug in the judge').


@pytest.mark.parametrize("name", ["kill_parent_in_forward", "undescribable_exception_in_forward", "endless_forward",
                                  "non_tensor_output"])
def test_evaluating_against_a_hostile_reference_is_a_readable_verdict(judge: Judge, name: str) -> None:
    ev = evaluate(judge, GOOD, task=task(HOSTILE[name][0], name=f"hostile-{name}"), timeout_s=4)
    canary(judge)
    assert_readable(ev)
    assert ev.verdict != Verdict.passed, summary(ev)


def test_a_reference_that_patches_torch_cannot_make_a_wrong_candidate_pass(judge: Judge) -> None:
    patched = task(HOSTILE["patch_torch_at_import"][0], name="patched")
    ev = evaluate(judge, candidate("        return affine(x) + 1.0"), task=patched)
    canary(judge)
    assert ev.verdict == Verdict.mismatch, summary(ev)
    assert evaluate(judge, GOOD, task=patched).verdict == Verdict.passed


def test_processes_a_reference_forks_end_with_the_judge() -> None:
    marker = f"{600 + uuid.uuid4().int % 100}.{uuid.uuid4().int % 10**9:09d}"
    source = at_import(f"import os\nif os.fork() == 0:\n    os.setsid()\n"
                       f"    os.execvp('sleep', ['sleep', '{marker}'])\n")
    root = scratch_root()
    try:
        with Judge(redteam_settings(root)) as j:
            probe = j.probe_task(task(source, name="forker"), timeout_s=20)
            assert probe.ok, probe
            canary(j)
        deadline = time.monotonic() + 10
        survivors = _with_marker(marker)
        while survivors and time.monotonic() < deadline:
            time.sleep(0.2)
            survivors = _with_marker(marker)
        for pid in survivors:
            os.kill(int(pid), 9)
        assert not survivors, f"a process the reference started outlived the judge: {survivors}"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _with_marker(marker: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        found.append(pid)
            except OSError:
                pass
    return found


FIND_SOCKETS = '''
import gc, os, stat


def _conn_fd():
    from adaexplore_mcp.judge.runner import Runner
    return [o for o in gc.get_objects() if isinstance(o, Runner)][0].conn.fileno()


def _other_sockets():
    mine = os.fstat(_conn_fd()).st_ino
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            st = os.fstat(int(name))
        except OSError:
            continue
        if stat.S_ISSOCK(st.st_mode) and st.st_ino != mine:
            found.append(int(name))
    return found
'''


def _next_evaluations(judge: Judge, count: int = 3) -> list[str]:
    problems = []
    for _ in range(count):
        try:
            ev = judge.evaluate(task(), GOOD)
            if ev.verdict != Verdict.passed or ev.warnings:
                problems.append(summary(ev)[:300])
        except Exception as exc:  # noqa: BLE001
            problems.append(f"{type(exc).__name__}: {str(exc)[:300]}")
    return problems


def test_a_reference_sending_a_malformed_reply_is_a_probe_error(fresh_judge: Judge) -> None:
    source = FIND_SOCKETS + in_get_inputs(
        "    from adaexplore_mcp.judge import wire\n"
        "    from multiprocessing.connection import Connection\n"
        "    wire.send(Connection(os.dup(_conn_fd())), {'surprise': True})\n"
        "    return [torch.randn(N)]")
    try:
        probe = fresh_judge.probe_task(task(source, name="malformed"), timeout_s=10)
    except Exception as exc:  # noqa: BLE001
        raise AssertionError(f"probe_task raised {type(exc).__name__}: {str(exc)[-300:]}") from exc
    as_json(probe)
    assert not probe.ok and probe.error, probe
    assert not _next_evaluations(fresh_judge, 1)


def test_a_reference_writing_on_the_zygote_channel_cannot_break_the_next_evaluation(fresh_judge: Judge) -> None:
    """Found by this corpus (fixed in 20abbb8): reference runners inherited the zygote's control socket too."""
    source = FIND_SOCKETS + at_import("for _fd in _other_sockets():\n    os.write(_fd, b'{\"pid\": 1}\\n' * 4)\n")
    try:
        probe = fresh_judge.probe_task(task(source, name="zygote-writer"), timeout_s=10)
        as_json(probe)
    except Exception as exc:  # noqa: BLE001
        raise AssertionError(f"probe_task raised {type(exc).__name__}: {str(exc)[-300:]}") from exc
    problems = _next_evaluations(fresh_judge)
    assert not problems, f"honest candidates after the hostile reference: {problems}"


SPINNERS = {
    "thread": "import threading\n\ndef _spin():\n    while True:\n        pass\n\n"
              "threading.Thread(target=_spin, daemon=True).start()\n",
    # the work done in short-lived children it reaps: their CPU time lands in the parent's cutime
    "reaped_children": "import os, threading, time\n\ndef _spin():\n    while True:\n        pid = os.fork()\n"
                       "        if pid == 0:\n            t = time.time()\n            while time.time() - t < 0.5:\n"
                       "                pass\n            os._exit(0)\n        os.waitpid(pid, 0)\n\n"
                       "threading.Thread(target=_spin, daemon=True).start()\n",
}


@pytest.mark.parametrize("how", sorted(SPINNERS))
def test_a_reference_that_leaves_a_thread_running_is_replaced_and_said_so(fresh_judge: Judge, how: str) -> None:
    """Found by a red team: a thread started at import kept a core busy in the cached reference runner between
    evaluations (on a GPU it could run device work while another task's candidate is timed). The referee reads
    the runner's CPU time from the host's /proc (judge/processes/idle_watch.py) and replaces a runner that worked while
    idle, with a warning on the evaluation that found it."""
    hostile = task(at_import(SPINNERS[how]), name="spinner")
    first = fresh_judge.evaluate(hostile, GOOD)
    assert first.verdict == Verdict.passed and not first.warnings, summary(first)
    time.sleep(2.5)  # idle: the thread keeps running in the cached reference's process
    second = fresh_judge.evaluate(hostile, GOOD)
    assert second.verdict == Verdict.passed, summary(second)
    assert any("kept running between evaluations" in w for w in second.warnings), summary(second)
    assert not _next_evaluations(fresh_judge, 1)  # another task's canary: judged right, no warning
    time.sleep(1.5)  # an honest reference idles as long: kept, no warning
    assert not _next_evaluations(fresh_judge, 1)
    from adaexplore_mcp.judge.notes import read_notes

    fresh_judge.close()  # the worker's log goes; its referee's note on the drop stays in judge-notes.log
    notes = read_notes(fresh_judge.settings.home / "logs")
    assert any("dropped" in n for n in notes), notes


def test_a_reference_that_leaves_sleeping_processes_behind_is_replaced_and_said_so(fresh_judge: Judge) -> None:
    """Red team, round nine: a reference that forked children which only sleep used no CPU, so the idle watch kept
    it cached, holding the host's pids (RLIMIT_NPROC does not bind root) until no runner could start and every
    later honest candidate got an error. Forty here, enough to pass the watch's bound and harmless to the host."""
    holder = "import os, time\n\nfor _ in range(40):\n    if os.fork() == 0:\n        time.sleep(600)\n        os._exit(0)\n"
    hostile = task(at_import(holder), name="process_holder")
    first = fresh_judge.evaluate(hostile, GOOD)
    assert first.verdict == Verdict.passed, summary(first)
    second = fresh_judge.evaluate(hostile, GOOD)
    assert second.verdict == Verdict.passed, summary(second)
    assert any("processes behind" in w for w in second.warnings), summary(second)
    assert not _next_evaluations(fresh_judge, 1)
