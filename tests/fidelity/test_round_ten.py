"""Honest candidates the judge answered wrongly or without saying why (fidelity helper, round ten), under the
CPU interpreter (the `judge` fixture of conftest.py):

- an output buffer kept on the module and written by every call: the judge compares several calls' results,
  so trial 2's had been overwritten by trial 4's and the verdict was a mismatch with no word of why; it is now
  `bad_output`, saying the calls returned the same memory;
- a task that returns one of its inputs as it is: the candidate's `x` is refused (an output may not alias an
  input), and the message now says to return `x.clone()`;
- a task whose forward returns a Python float: its record held the number itself, so no candidate could ever
  pass; the task is refused when created, saying to return a 0-d tensor;
- an fp64 `tl.dot` was flagged as TF32, which takes fp32 operands only.
"""

from __future__ import annotations

import dataclasses

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.judge.precision import relative_to_task
from adaexplore_mcp.models import Verdict
from tests.test_judge_cases import AFFINE_KERNEL, AFFINE_TASK, HEADER, task

STATIC_BUFFER = HEADER + AFFINE_KERNEL + '''

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.out = None

    def forward(self, x):
        if self.out is None:
            self.out = torch.empty_like(x)
        affine_kernel[(triton.cdiv(x.numel(), 128),)](x, self.out, x.numel(), BLOCK=128)
        return self.out
'''

PASSTHROUGH_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2 + 1, x


def get_inputs():
    return [torch.randn(512)]


def get_init_inputs():
    return []
'''

PASSTHROUGH = HEADER + AFFINE_KERNEL + '''

class ModelNew(nn.Module):
    def forward(self, x):
        return affine(x), x
'''

FLOAT_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return float((x * x).sum())


def get_inputs():
    return [torch.randn(512)]


def get_init_inputs():
    return []
'''


def test_an_output_buffer_reused_by_every_call_is_refused_saying_so(judge: Judge, monkeypatch) -> None:
    # five trials, as by default: trials 3 to 5 run in one request (each request reads the judge's settings, so the
    # module's judge serves; a judge of its own cost 10 s to start on two busy cores)
    limits = dataclasses.replace(judge.settings.limits, trials=5)
    monkeypatch.setattr(judge, "settings", dataclasses.replace(judge.settings, limits=limits))
    ev = judge.evaluate(task(AFFINE_TASK), STATIC_BUFFER)
    assert ev.verdict == Verdict.rejected and ev.rejected.check == "bad_output", ev
    assert "same memory" in ev.rejected.message and "new tensors" in ev.rejected.message, ev.rejected


def test_returning_an_input_as_it_is_says_to_clone_it(judge: Judge) -> None:
    ev = judge.evaluate(task(PASSTHROUGH_TASK, name="passthrough"), PASSTHROUGH)
    assert ev.verdict == Verdict.rejected and ev.rejected.check == "output_aliases_input", ev
    assert "x.clone()" in ev.rejected.message, ev.rejected
    clone = PASSTHROUGH.replace("return affine(x), x", "return affine(x), x.clone()")
    assert judge.evaluate(task(PASSTHROUGH_TASK, name="passthrough"), clone).verdict == Verdict.passed


def test_a_task_returning_a_python_float_is_refused_with_what_to_return(judge: Judge) -> None:
    probe = judge.probe_task(task(FLOAT_TASK, name="float_out"))
    assert not probe.ok and "Python float" in probe.error and "0-d" in probe.error, probe


def test_tf32_is_no_reason_for_a_float64_task() -> None:
    reasons = ["tl.dot without input_precision='ieee': fp32 operands run in TF32 on NVIDIA GPUs (line 15)",
               "uses torch.float16: computes below float32 (line 3)"]
    assert relative_to_task(reasons, "float64") == reasons[1:]
    assert relative_to_task(reasons, "float32") == reasons
