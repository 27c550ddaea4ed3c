"""Failures that are hard to describe: exceptions whose text cannot be produced, huge or malformed
messages, exits, signals, recursion. Expected: a readable verdict (compile_error / runtime_error / crashed /
timeout) with a non-empty message, never an exception out of Judge.evaluate, never "a bug in the judge",
and a result the server can serialize; then a clean canary."""

from __future__ import annotations

from pathlib import Path

import pytest

import adaexplore_mcp
from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Evaluation, Verdict
from tests.redteam.conftest import ERROR_VERDICTS, JUDGE_BUG, as_json, assert_readable, canary, evaluate, summary
from tests.test_judge_cases import AFFINE_TASK, GOOD, candidate, task

ODD = '''
import os
import signal
import sys
import time


class BadStr(Exception):
    def __str__(self):
        raise ValueError("no str for you")

    def __repr__(self):
        raise ValueError("no repr either")


class IntStr(Exception):
    def __str__(self):
        return 42


class NotAnException(BaseException):
    pass


def recurse(n):
    return recurse(n + 1)
'''


def odd(body: str, init: str = "") -> str:
    return candidate(body, extra=ODD, init=init)


FORWARD = {
    "ten_megabyte_message": ("        affine(x)\n        raise RuntimeError('m' * (10 << 20))", Verdict.runtime_error),
    "nul_and_escape_codes": ("        affine(x)\n        raise RuntimeError('a\\x00b\\x1b[31mred\\r\\n')",
                             Verdict.runtime_error),
    "huge_exception_class_name": ("        affine(x)\n        raise type('E' * 100000, (Exception,), {})('x')",
                                  Verdict.runtime_error),
    "cyclic_cause_chain": ("        e = RuntimeError('cycle')\n        e.__cause__ = e\n        e.__context__ = e\n"
                           "        raise e", Verdict.runtime_error),
    "sys_exit_0": ("        sys.exit(0)", Verdict.runtime_error),
    "sys_exit_none": ("        sys.exit()", Verdict.runtime_error),
    "os_exit_0": ("        affine(x)\n        os._exit(0)", Verdict.crashed),
    "os_exit_1": ("        os._exit(1)", Verdict.crashed),
    "keyboard_interrupt": ("        raise KeyboardInterrupt", Verdict.runtime_error),
    "system_exit": ("        raise SystemExit('bye')", Verdict.runtime_error),
    "generator_exit": ("        raise GeneratorExit", Verdict.runtime_error),
    "base_exception_subclass": ("        raise NotAnException('odd')", Verdict.runtime_error),
    "recursion_error": ("        return recurse(0)", Verdict.runtime_error),
    "sigsegv_to_self": ("        os.kill(os.getpid(), signal.SIGSEGV)\n        time.sleep(1)\n        return affine(x)",
                        None),
    "abort": ("        affine(x)\n        os.abort()", Verdict.crashed),
}


@pytest.mark.parametrize("body,expected", list(FORWARD.values()), ids=list(FORWARD))
def test_an_odd_failure_in_forward_is_a_readable_verdict(judge: Judge, body: str, expected: Verdict | None) -> None:
    ev = evaluate(judge, odd(body))
    canary(judge)
    assert_readable(ev)
    if expected is None:  # pid 1 of a pid namespace ignores some signals it sends itself: passing is fine too
        assert ev.verdict in ERROR_VERDICTS + (Verdict.passed,), summary(ev)
    else:
        assert ev.verdict == expected, summary(ev)
    if ev.error is not None:
        assert len(ev.error.message) <= 400 and len(ev.error.excerpt) <= 1500 and len(ev.error.exception) <= 80


IMPORT = {
    "sys_exit_0": "import sys\nsys.exit(0)\n",
    "os_exit_0": "import os\nos._exit(0)\n",
    "keyboard_interrupt": "raise KeyboardInterrupt\n",
    "recursion": "def f():\n    return f()\nf()\n",
    "ten_megabyte_message": "raise ImportError('m' * (10 << 20))\n",
}


@pytest.mark.parametrize("prefix", list(IMPORT.values()), ids=list(IMPORT))
def test_an_odd_failure_at_import_is_a_readable_verdict(judge: Judge, prefix: str) -> None:
    ev = evaluate(judge, prefix + GOOD)
    canary(judge)
    assert_readable(ev)
    assert ev.verdict in (Verdict.compile_error, Verdict.crashed), summary(ev)


def test_an_alarm_signal_is_a_readable_verdict_or_ignored(judge: Judge) -> None:
    body = ("        if not hasattr(self, 'armed'):\n            self.armed = True\n            signal.alarm(1)\n"
            "            time.sleep(2)\n        return affine(x)")
    ev = evaluate(judge, odd(body))
    canary(judge)
    assert_readable(ev)
    assert ev.verdict in ERROR_VERDICTS + (Verdict.passed,), summary(ev)


# Found by this corpus (fixed in 20abbb8): Runner._error called str(exc) for its out-of-memory test, so an
# exception whose __str__ raises made the runner answer {'internal': ...}; the referee ignored that at load
# and build (going on with no module or model: "'NoneType' object is not callable") and reported
# 'bad_output: ... no results' in the trials.


@pytest.mark.parametrize("body", ["        affine(x)\n        raise BadStr()",
                                  "        affine(x)\n        raise IntStr()"], ids=["str_raises", "str_returns_int"])
def test_an_exception_whose_text_cannot_be_produced_in_forward(judge: Judge, body: str) -> None:
    ev = evaluate(judge, odd(body))
    canary(judge)
    assert_readable(ev)
    assert ev.verdict == Verdict.runtime_error and ev.error.exception in ("BadStr", "IntStr"), summary(ev)


def test_an_exception_whose_text_cannot_be_produced_at_import(judge: Judge) -> None:
    ev = evaluate(judge, ODD + "raise BadStr()\n" + GOOD)
    canary(judge)
    assert_readable(ev)
    assert ev.verdict == Verdict.compile_error and ev.error.exception == "BadStr", summary(ev)


def test_an_exception_whose_text_cannot_be_produced_in_the_constructor(judge: Judge) -> None:
    ev = evaluate(judge, odd("        return affine(x)", init="        raise BadStr()"))
    canary(judge)
    assert_readable(ev)
    assert ev.verdict == Verdict.compile_error and ev.error.exception == "BadStr", summary(ev)


@pytest.mark.parametrize("source", [
    odd("        affine(x)\n        raise RuntimeError('bad \\ud800 text \\udfff')"),
    "raise RuntimeError('\\ud800')\n" + GOOD,
], ids=["in_forward", "at_import"])
def test_lone_surrogates_in_a_message_leave_a_serializable_result(judge: Judge, source: str) -> None:
    """Without sanitizing, Evaluation.model_dump_json() raises and the server cannot store the result."""
    ev = evaluate(judge, source)
    canary(judge)
    assert ev.verdict in ERROR_VERDICTS, summary(ev)
    as_json(ev)


# Found by the red team: a SIGALRM handler raising SystemExit, on a repeating itimer armed in forward, fired
# inside the judge's own code in the runner; the runner exited with code 70 ("crashed ... a segfault?") and
# the excerpt was the judge's traceback with host paths. The runner now disarms the timers and puts its own
# handlers back after each call into user code; what still reaches its code is the user's error.
JUDGE_DIR = str(Path(adaexplore_mcp.__file__).parent)
EVIL_OUTPUT = '''

class Evil(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        raise SystemExit(7)
'''


def alarm_exits(interval: float) -> str:
    return ("        def h(*a): raise SystemExit(7)\n        signal.signal(signal.SIGALRM, h)\n"
            f"        signal.setitimer(signal.ITIMER_REAL, {interval}, {interval})\n        return affine(x)")


def assert_no_judge_frames(ev: Evaluation) -> None:
    assert ev.error is not None and JUDGE_DIR not in ev.error.excerpt and "site-packages" not in ev.error.excerpt, \
        summary(ev)
    assert JUDGE_DIR not in ev.error.message, summary(ev)


@pytest.mark.parametrize("interval", [0.05, 0.0001], ids=["50ms", "100us"])
def test_a_repeating_alarm_whose_handler_exits_is_the_candidates_error(judge: Judge, interval: float) -> None:
    """Disarmed once forward returns. Every 100 us, on a loaded host, the alarm can still fire in the few
    bytecodes between forward's return and the disarm: the runner then exits, and the candidate's verdict is a
    crash (seen in 3 slow-suite runs on 2 busy cores; never alone). The judge is unharmed (the canary) either way."""
    ev = evaluate(judge, odd(alarm_exits(interval)))
    canary(judge)
    assert_readable(ev)
    allowed = (Verdict.passed, Verdict.runtime_error) + ((Verdict.crashed,) if interval < 0.001 else ())
    assert ev.verdict in allowed, summary(ev)
    if ev.verdict == Verdict.runtime_error:
        assert ev.error.exception == "SystemExit" and "candidate.py" in ev.error.excerpt, summary(ev)
        assert_no_judge_frames(ev)


def test_an_exit_raised_into_the_judges_code_is_the_candidates_runtime_error(judge: Judge) -> None:
    """An output whose methods raise SystemExit: raised in the judge's code, after forward returned."""
    ev = evaluate(judge, candidate("        return affine(x).as_subclass(Evil)", extra=ODD + EVIL_OUTPUT))
    canary(judge)
    assert_readable(ev)
    assert ev.verdict == Verdict.runtime_error and ev.error.exception == "SystemExit", summary(ev)
    assert "while the judge's code was running" in ev.error.message, summary(ev)
    assert 'File "candidate.py"' in ev.error.excerpt and "__torch_function__" in ev.error.excerpt, summary(ev)
    assert_no_judge_frames(ev)


@pytest.mark.parametrize("where", ["forward", "import"])
def test_a_reference_that_arms_an_exiting_alarm_still_judges(judge: Judge, where: str) -> None:
    handler = "import signal\ndef _h(*a): raise SystemExit(3)\n"
    if where == "import":
        source = handler + "signal.signal(signal.SIGALRM, _h)\nsignal.setitimer(signal.ITIMER_REAL, 0.2, 0.2)\n" \
            + AFFINE_TASK
    else:
        source = handler + AFFINE_TASK.replace("        return x * 2 + 1", "        signal.signal(signal.SIGALRM, _h)\n"
                                               "        signal.setitimer(signal.ITIMER_REAL, 0.01, 0.01)\n"
                                               "        return x * 2 + 1")
    spec = task(source, name=f"alarm_{where}")
    probe = judge.probe_task(spec)
    assert probe.ok, probe.error
    ev = evaluate(judge, GOOD, task=spec)
    canary(judge)
    assert ev.verdict == Verdict.passed, summary(ev)


def test_an_exit_raised_into_the_judges_code_by_a_reference_is_a_readable_probe_error(judge: Judge) -> None:
    source = AFFINE_TASK.replace("return x * 2 + 1", "return (x * 2 + 1).as_subclass(Evil)") + EVIL_OUTPUT
    probe = judge.probe_task(task(source, name="evil_reference"))
    canary(judge)
    assert not probe.ok and "the reference's code raised SystemExit while the judge's code" in probe.error, probe
    assert "exit code" not in probe.error and JUDGE_BUG not in probe.error, probe.error


@pytest.mark.parametrize("body, said", [
    ("        y = affine(x)\n        return [y] * 100000", "larger than"),  # an answer over the header's bound
    ("        y = affine(x)\n        return torch.nested.nested_tensor([y, y[:3]])", "plain dense tensor"),
])
def test_outputs_the_judge_cannot_take_are_named_as_such(judge: Judge, body: str, said: str) -> None:
    """Found by a red team: an over-size answer read as a dead runner ("a segfault?") and a nested tensor as
    "did not send back its inputs"."""
    ev = evaluate(judge, candidate(body))
    canary(judge)
    assert ev.verdict != Verdict.passed, summary(ev)
    assert_readable(ev)
    text = (ev.error.message if ev.error else "") + (ev.rejected.message if ev.rejected else "")
    assert said in text and "segfault" not in text, summary(ev)
