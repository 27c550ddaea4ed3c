"""Forging the record the replay runs (replay/record.py -> replay/referee_side.py).

The candidate's process reports the program of its last trial, so a candidate can replace it with anything:
junk, operators outside ATen, modules its kernels do not read, slots that do not exist, or a program that
reads a process's memory. The replay runs in a fresh sandboxed process and the referee compares what comes
back, so each forgery is a readable `work_not_replayable` (never a judge bug, never a pass) and the canary
after it is judged right.
"""

from __future__ import annotations

import pytest

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Verdict
from tests.redteam.conftest import JUDGE_BUG, TOKEN_KERNELS, canary, evaluate, summary
from tests.test_judge_cases import candidate

# What the patched WorkTrace.program returns (a Python expression over `self`, the real trace).
FORGERIES = {
    # an honest-looking record: one launch of a real kernel of the source, which computes nothing
    "honest_looking_launch": ("{'inputs': self.inputs, 'constants': [], 'kernels': {'noop_kernel': {}}, "
                              "'output': {'t': self.inputs[0]}, 'steps': [{'launch': 'noop_kernel', "
                              "'args': {'l': [{'t': self.inputs[0]}]}, 'kwargs': {}, 'grid': [1]}]}"),
    "steps_not_a_list": "{'inputs': self.inputs, 'constants': [], 'kernels': {}, 'output': None, 'steps': 7}",
    "operator_outside_aten": ("{'inputs': self.inputs, 'constants': [], 'kernels': {}, 'output': {'t': self.inputs[0]}, "
                              "'steps': [{'op': 'os::system', 'args': {'l': ['true']}, 'kwargs': {}, 'out': {'v': 0}}]}"),
    "kernel_reads_os_as_tl": ("{**self_program(self), 'kernels': {k: {'tl': {'module': 'os'}} "
                              "for k in self_program(self)['kernels']}}"),
    "slot_that_does_not_exist": "{**self_program(self), 'output': {'t': 10 ** 6}}",
    "kernel_not_in_the_source": ("{**self_program(self), 'kernels': {'ghost_kernel': {}}, 'steps': "
                                 "[{'launch': 'ghost_kernel', 'args': {'l': []}, 'kwargs': {}, 'grid': [1]}]}"),
    "alias_past_the_end": ("{**self_program(self), 'steps': [{'alias': self.inputs[0], 'slot': 999, 'dtype': 'float32', "
                           "'size': [1 << 40], 'stride': [1], 'offset': 0}, *self_program(self)['steps']], "
                           "'output': {'t': 999}}"),
}


@pytest.mark.parametrize("forgery", list(FORGERIES), ids=list(FORGERIES))
def test_a_forged_program_is_a_readable_rejection(judge: Judge, forgery: str) -> None:
    body = ("        import builtins\n"
            "        from adaexplore_mcp.judge.replay import record as work_trace\n"
            "        if not hasattr(builtins, 'self_program'):\n"
            "            builtins.self_program = work_trace.WorkTrace.program\n"
            f"            work_trace.WorkTrace.program = lambda self: {FORGERIES[forgery]}\n"
            "        return affine(x)")
    ev = evaluate(judge, candidate(body, extra=TOKEN_KERNELS))
    canary(judge)
    assert JUDGE_BUG not in summary(ev), summary(ev)
    assert ev.verdict == Verdict.rejected and ev.rejected.check == "work_not_replayable", summary(ev)
