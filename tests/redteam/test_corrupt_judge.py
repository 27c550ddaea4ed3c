"""Corrupting the judge from inside the candidate's process: patched comparison functions, patched judge
modules, bytes written on every file descriptor, forged protocol messages, a forked child or a thread
that keeps talking. Verdicts are decided in the referee, on outputs it rebuilds itself, so patches in the
candidate's process only fool the checks that process reports on itself. After each attack the same
judge must pass GOOD cleanly (canary)."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Verdict
from tests.redteam.conftest import (
    JUDGE_BUG, TOKEN_KERNELS, as_json, assert_not_passed, assert_readable, canary, evaluate, summary,
)
from tests.test_judge_cases import GOOD, candidate, task

HELPERS = '''
import gc
import json
import os
import socket
import stat
import threading
import time


def spray(lo, hi, data):
    for fd in range(lo, hi):
        try:
            os.write(fd, data)
        except OSError:
            pass


def conn_fd():
    """The runner's own connection to the referee (found in this very process)."""
    from adaexplore_mcp.judge.runner import Runner
    return [o for o in gc.get_objects() if isinstance(o, Runner)][0].conn.fileno()


def other_sockets():
    """Every socket this process holds besides its connection to the referee."""
    mine = os.fstat(conn_fd()).st_ino
    found = []
    for name in sorted(os.listdir("/proc/self/fd"), key=int):
        try:
            st = os.fstat(int(name))
        except OSError:
            continue
        if stat.S_ISSOCK(st.st_mode) and st.st_ino != mine:
            found.append(int(name))
    return found


def forged_reply(y):
    from adaexplore_mcp.judge import wire
    out = []
    enc = wire.encode_value([y], out)["list"]
    return {"results": [{"launched": ["affine_kernel"], "flags": [], "aliased": False, "mutated": False,
                         "outputs": enc[0]}]}, out


def forge_fork_replies(pid, count):
    """Hand the referee `count` answers to 'fork a runner' that name `pid`, each with a socket attached."""
    if globals().get("_forged"):
        return
    globals()["_forged"] = True
    for fd in other_sockets():
        s = socket.socket(fileno=os.dup(fd))
        for _ in range(count):
            a, b = socket.socketpair()
            socket.send_fds(s, [json.dumps({"pid": pid, "status": None}).encode() + b"\\n"], [a.fileno()])
            a.close()
            b.close()
        s.detach()
'''


def attack(body: str, init: str = "") -> str:
    return candidate(body, extra=TOKEN_KERNELS + HELPERS, init=init)


def next_evaluations_are_clean(judge: Judge, count: int = 3) -> None:
    """Like `canary`, but as assertions: for attacks whose damage shows in the evaluations after them."""
    problems = []
    for _ in range(count):
        try:
            ev = judge.evaluate(task(), GOOD)
        except Exception as exc:  # noqa: BLE001
            problems.append(f"{type(exc).__name__}: {str(exc)[:300]}")
            continue
        if ev.verdict != Verdict.passed or ev.warnings:
            problems.append(summary(ev)[:300])
    assert not problems, f"honest candidates after the attack: {problems}"


# -- patched comparisons and judge modules: the referee compares, not the candidate -----------------------

PATCHES = {
    "tensor_eq_and_allclose": ("        torch.Tensor.__eq__ = lambda a, b: torch.ones(a.shape, dtype=torch.bool)\n"
                               "        torch.allclose = lambda *a, **k: True\n"
                               "        torch.Tensor.allclose = lambda *a, **k: True\n"
                               "        torch.equal = lambda *a, **k: True\n"),
    "torch_testing": ("        import torch.testing\n"
                      "        torch.testing.assert_close = lambda *a, **k: None\n"
                      "        torch.isclose = lambda a, b, *r, **k: torch.ones(a.shape, dtype=torch.bool)\n"),
    "judge_compare": ("        from adaexplore_mcp.judge import compare\n"
                      "        compare.compare = lambda *a, **k: None\n"
                      "        compare._compare_one = lambda *a, **k: None\n"),
    "judge_wire": ("        from adaexplore_mcp.judge import wire\n"
                   "        wire.decode_value = lambda *a, **k: None\n"),
    "judge_evaluation_module": ("        import adaexplore_mcp.judge.evaluation as e\n"
                                "        e.compare = lambda *a, **k: None\n"),
    "builtins": ("        import builtins\n        builtins.compare = lambda *a, **k: None\n"
                 "        builtins.isinstance = lambda *a: True\n"),
}


@pytest.mark.parametrize("patch", list(PATCHES.values()), ids=list(PATCHES))
def test_patching_comparison_code_in_the_candidates_process_does_not_make_wrong_values_pass(
        judge: Judge, patch: str) -> None:
    ev = evaluate(judge, attack(patch + "        return affine(x) + 1.0"))
    canary(judge)
    assert_not_passed(ev)


# The runner's own checks, under the names the candidate's runner uses (runner_candidate.py): its alias check, and on
# the CPU the copies of the inputs it sends back after the call (sent as an empty list), patched where its request
# table dispatches `forward`. A name that is gone fails the candidate's import loudly, so this test can never again
# patch nothing (it patched `_mutated` and `_aliased` long after both went).
FORGED_SELF_CHECKS = '''
from adaexplore_mcp.judge import runner_candidate as _r
for _owner, _name in ((_r, "aliased_output"), (_r.CandidateRunner, "op_forward")):
    if not hasattr(_owner, _name):
        raise RuntimeError(f"the attack patches nothing: {_owner.__name__}.{_name} is gone (update the test)")
if _r.CandidateRunner.REQUESTS.get("forward") is not _r.CandidateRunner.op_forward:
    raise RuntimeError("the attack patches nothing: `forward` is not dispatched to op_forward (update the test)")
_r.aliased_output = lambda *a, **k: None
_forward = _r.CandidateRunner.op_forward


def _forged_forward(self, req, bufs, out):
    reply = _forward(self, req, bufs, out)
    for result in reply.get("results", []):
        if "inputs_after" in result:
            result["inputs_after"] = {"list": []}
    return reply


_r.CandidateRunner.REQUESTS["forward"] = _r.CandidateRunner.op_forward = _forged_forward
'''


def test_patching_the_runners_self_checks_hides_an_in_place_computation(judge: Judge) -> None:
    ev = evaluate(judge, candidate("        affine(x, out=x)\n        return x", extra=FORGED_SELF_CHECKS))
    canary(judge)
    assert_not_passed(ev)
    # Unpatched, the runner's alias check rejects it (output_aliases_input). Patched, the referee's own comparison
    # of the inputs does: an input the runner did not send back counts as changed.
    assert ev.rejected is not None and ev.rejected.check == "input_mutated", summary(ev)


def test_patching_tensor_eq_hides_a_modified_input(judge: Judge) -> None:
    body = ("        torch.Tensor.__eq__ = lambda a, b: torch.ones(a.shape, dtype=torch.bool)\n"
            "        y = affine(x)\n        x.zero_()\n        return y")
    ev = evaluate(judge, attack(body))
    canary(judge)
    assert_not_passed(ev)


# -- bytes on file descriptors, forged messages ------------------------------------------------------------

def test_writing_on_stdin_stdout_stderr_changes_nothing(judge: Judge) -> None:
    body = "        spray(0, 3, b'\\x00\\x00\\x00\\x10{\"results\": []}\\n' * 100)\n        return affine(x)"
    ev = evaluate(judge, attack(body))
    canary(judge)
    assert ev.verdict == Verdict.passed, summary(ev)


def test_writing_on_the_runners_connection_cannot_forge_a_result(judge: Judge) -> None:
    body = ("        spray(conn_fd(), conn_fd() + 1, b'\\x00\\x00\\x00\\x10{\"results\": []}\\n')\n"
            "        return torch.zeros_like(x)")
    ev = evaluate(judge, attack(body))
    canary(judge)
    assert_not_passed(ev)


def test_a_forged_well_formed_reply_with_pytorch_outputs_does_not_pass(judge: Judge) -> None:
    """The candidate speaks the protocol itself: a reply claiming a kernel launch, then its real reply."""
    body = ("        from adaexplore_mcp.judge import wire\n"
            "        from multiprocessing.connection import Connection\n"
            "        reply, bufs = forged_reply(x * 2 + 1)\n"
            "        wire.send(Connection(os.dup(conn_fd())), reply, bufs)\n"
            "        return torch.zeros_like(x)")
    ev = evaluate(judge, attack(body))
    canary(judge)
    assert_not_passed(ev)


MALFORMED = {
    "launched_not_a_list": "{'results': [{'launched': 5, 'outputs': None}]}",
    "results_a_dict": "{'results': {'0': {}}}",
    "result_not_a_dict": "{'results': [7]}",
    "outputs_bad_descriptor": "{'results': [{'launched': ['affine_kernel'], 'outputs': {'tensor': {'dtype': 'float32', "
                              "'shape': [512], 'buf': 99}}}]}",
    "verdict_unknown": "{'results': [{'verdict': 'passed', 'error': 5}]}",
}


# Found by this corpus (fixed in 20abbb8): 'launched': 5 raised TypeError in _judge_call, and 'results' as a
# dict raised KeyError in the old in-process dependence run: both were 'a bug in the judge' out of Judge.evaluate.
@pytest.mark.parametrize("reply", list(MALFORMED.values()), ids=list(MALFORMED))
def test_a_malformed_reply_is_a_readable_verdict(judge: Judge, reply: str) -> None:
    """The candidate answers for its runner: a well-formed message with ill-typed fields, sent on its own
    connection before the runner's real reply, in every trial. Nothing escapes, and it never passes."""
    body = ("        from adaexplore_mcp.judge import wire\n"
            "        from multiprocessing.connection import Connection\n"
            f"        wire.send(Connection(os.dup(conn_fd())), {reply})\n"
            "        return affine(x)")
    ev = evaluate(judge, attack(body))
    canary(judge)
    assert JUDGE_BUG not in as_json(ev), summary(ev)
    assert ev.verdict != Verdict.passed, summary(ev)


def test_a_forked_child_writing_a_forged_reply_does_not_pass(judge: Judge) -> None:
    body = ("        if os.fork() == 0:\n"
            "            from adaexplore_mcp.judge import wire\n"
            "            from multiprocessing.connection import Connection\n"
            "            reply, bufs = forged_reply(x * 2 + 1)\n"
            "            wire.send(Connection(os.dup(conn_fd())), reply, bufs)\n"
            "            os._exit(0)\n"
            "        time.sleep(0.3)\n"
            "        return torch.zeros_like(x)")
    ev = evaluate(judge, attack(body))
    canary(judge)
    assert_not_passed(ev)


def test_a_thread_that_keeps_writing_on_the_connection_does_not_pass(judge: Judge) -> None:
    body = ("        fd = conn_fd()\n"
            "        def scribble():\n"
            "            while True:\n"
            "                try:\n                    os.write(fd, b'junk' * 64)\n"
            "                except OSError:\n                    return\n"
            "                time.sleep(0.005)\n"
            "        threading.Thread(target=scribble, daemon=True).start()\n"
            "        return torch.zeros_like(x)")
    ev = evaluate(judge, attack(body))
    canary(judge)
    assert_not_passed(ev)


def test_a_thread_that_keeps_running_after_a_correct_answer_does_no_harm(judge: Judge) -> None:
    body = ("        if not hasattr(self, 't'):\n"
            "            def busy():\n"
            "                while True:\n                    os.write(2, b'noise ' * 100)\n"
            "                    torch.randn(1000).sum()\n"
            "            self.t = threading.Thread(target=busy, daemon=True)\n            self.t.start()\n"
            "        return affine(x)")
    ev = evaluate(judge, attack(body))
    canary(judge)
    assert ev.verdict == Verdict.passed, summary(ev)


def test_writing_on_every_descriptor_cannot_break_the_next_evaluation(fresh_judge: Judge) -> None:
    """Found by this corpus (fixed in 20abbb8): the runner inherited the zygote's control socket
    (zygote.serve's `ctrl.close()` in the child was deferred while `ctrl.makefile()` held a reference), so
    bytes written on every fd desynchronised the referee's fork/reap channel and the next honest evaluation
    failed with 'a bug in the judge'."""
    body = "        spray(3, 64, b'\\x00\\x00\\x00\\x10{\"results\": []}\\n')\n        return affine(x)"
    ev = evaluate(fresh_judge, attack(body))
    assert_readable(ev)
    next_evaluations_are_clean(fresh_judge)


def test_a_candidate_cannot_make_the_judge_kill_an_outside_process(fresh_judge: Judge) -> None:
    """Found by this corpus (CRITICAL, fixed in 20abbb8): through the inherited zygote control socket a
    candidate forged the zygote's answer to 'fork a runner' (any pid, a socket attached by SCM_RIGHTS); the
    referee later SIGKILLed that pid as its runner, from outside the sandbox."""
    victim = subprocess.Popen(["sleep", "300.2468"])
    try:
        ev = evaluate(fresh_judge, attack(f"        forge_fork_replies({victim.pid}, 10)\n        return affine(x)"))
        assert_readable(ev)
        for _ in range(4):  # the forged answers are consumed by the evaluations that follow
            try:
                fresh_judge.evaluate(task(), GOOD)
            except Exception:  # noqa: BLE001 - a desynchronised channel; the victim is the point here
                pass
        time.sleep(0.5)
        assert victim.poll() is None, f"the judge killed an outside process (pid {victim.pid}, " \
                                      f"status {victim.returncode})"
    finally:
        if victim.poll() is None:
            victim.send_signal(signal.SIGKILL)
        victim.wait(10)


# -- two candidates in a row -------------------------------------------------------------------------------

POLLUTER = '''
import builtins, os, sys
builtins.RT_POLLUTED = True
os.environ["RT_POLLUTED"] = "1"
sys.modules["rt_polluted"] = type(sys)("rt_polluted")
torch.Tensor.__add__ = lambda a, b: torch.zeros_like(a)
torch.randn = lambda *a, **k: torch.zeros(*a, **k)
import adaexplore_mcp.judge.runner_candidate as _runner
_runner.CandidateRunner.REQUESTS["forward"] = lambda *a, **k: {"results": []}
for path in (os.path.join(os.environ.get("TMPDIR", "/tmp"), "rt-polluted"), "/tmp/rt-polluted",
             "/dev/shm/rt-polluted"):
    try:
        open(path, "w").write("x")
    except OSError:
        pass
'''

POLLUTION_SEEN = '''
def pollution():
    import builtins, os, sys
    seen = []
    if getattr(builtins, "RT_POLLUTED", False): seen.append("builtins")
    if os.environ.get("RT_POLLUTED"): seen.append("environ")
    if "rt_polluted" in sys.modules: seen.append("sys.modules")
    if float((torch.ones(2) + torch.ones(2)).sum()) != 4.0: seen.append("Tensor.__add__")
    if float(torch.randn(64).abs().sum()) == 0.0: seen.append("torch.randn")
    seen += [p for p in (os.path.join(os.environ.get("TMPDIR", "/tmp"), "rt-polluted"), "/tmp/rt-polluted",
                         "/dev/shm/rt-polluted") if os.path.exists(p)]
    return seen
'''


def test_two_candidates_in_a_row_cannot_see_each_others_patches(judge: Judge) -> None:
    first = evaluate(judge, POLLUTER + GOOD)
    assert_readable(first)
    reader = candidate("        seen = pollution()\n        if seen:\n            raise RuntimeError(f'SAW {seen}')\n"
                       "        return affine(x)", extra=POLLUTION_SEEN)
    ev = evaluate(judge, reader)
    canary(judge)
    assert ev.verdict == Verdict.passed, summary(ev)


def test_two_candidates_in_a_row_cannot_pass_files_through_the_cache_dir(judge: Judge) -> None:
    writer = candidate("        d = os.environ['TRITON_CACHE_DIR']\n        os.makedirs(d, exist_ok=True)\n"
                       "        open(os.path.join(d, 'rt-note'), 'w').write('hello')\n        return affine(x)",
                       extra="\nimport os\n")
    assert evaluate(judge, writer).verdict == Verdict.passed
    reader = candidate("        p = os.path.join(os.environ['TRITON_CACHE_DIR'], 'rt-note')\n"
                       "        if os.path.exists(p):\n            raise RuntimeError('SAW ' + open(p).read())\n"
                       f"        for root, _, files in os.walk({str(judge.settings.cache_dir)!r}):\n"
                       "            if 'rt-note' in files:\n                raise RuntimeError('FOUND in ' + root)\n"
                       "        return affine(x)", extra="\nimport os\n")
    ev = evaluate(judge, reader)
    canary(judge)
    assert ev.verdict == Verdict.passed and JUDGE_BUG not in summary(ev), summary(ev)
