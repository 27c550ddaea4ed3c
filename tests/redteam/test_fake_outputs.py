"""Outputs that are not what they seem. Outputs cross a pickle-free wire and are rebuilt in the referee
as plain dense tensors, compared there: a lying subclass, a lazy object or a non-tensor never reaches
the comparison as itself. Expected: mismatch (or rejected/crashed), never passed."""

from __future__ import annotations

import pytest

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Verdict
from tests.redteam.conftest import assert_not_passed, assert_readable, canary, evaluate, summary
from tests.test_judge_cases import AFFINE_TASK, candidate, task

LIARS = '''
import threading
import time


class Liar(torch.Tensor):
    """Equal to everything, close to everything."""

    def __eq__(self, other):
        return torch.ones(self.shape, dtype=torch.bool)

    def __ne__(self, other):
        return torch.zeros(self.shape, dtype=torch.bool)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal, torch.Tensor.allclose, torch.Tensor.equal, torch.isclose):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})


class Boom(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        raise RuntimeError("boom from __torch_function__")


class Lazy:
    """Computes the output only when someone looks."""

    def __init__(self, make):
        self._make = make

    def __getattr__(self, name):
        return getattr(self._make(), name)

    def __eq__(self, other):
        return True
'''

ATTACKS = {
    "lying_subclass_with_wrong_values": "        return (affine(x) + 1).as_subclass(Liar)",
    "subclass_whose_torch_function_raises": "        return affine(x).as_subclass(Boom)",
    "lazy_object": "        y = affine(x)\n        return Lazy(lambda: y)",
    "dict_instead_of_tensor": "        return {'output': affine(x)}",
    "python_float": "        affine(x)\n        return 1.0",
    "none": "        affine(x)\n        return None",
    "ten_megabyte_string": "        affine(x)\n        return 'a' * (10 << 20)",
    "nan_where_finite": "        y = affine(x)\n        y[7] = float('nan')\n        return y",
    "inf_where_finite": "        y = affine(x)\n        y[0] = float('inf')\n        return y",
    "all_nan": "        affine(x)\n        return torch.full_like(x, float('nan'))",
    "wrong_dtype_float64": "        return affine(x).double()",
    "wrong_dtype_float16": "        return affine(x).half()",
    "wrong_dtype_int": "        return affine(x).round().int()",
    "wrong_shape": "        return affine(x)[:-1]",
    "extra_dimension": "        return affine(x)[None]",
    "two_outputs_instead_of_one": "        y = affine(x)\n        return y, y",
    "meta_device": "        affine(x)\n        return torch.empty(x.shape, device='meta')",
    "complex_dtype": "        return torch.complex(affine(x), torch.zeros_like(x))",
    "filled_later_by_a_thread": ("        y = torch.empty_like(x)\n"
                                 "        late = lambda: (time.sleep(0.3), y.copy_(affine(x)))\n"
                                 "        threading.Thread(target=late).start()\n"
                                 "        affine(x)\n        return y"),
    "huge_output": "        affine(x)\n        return torch.zeros(64 << 20)",
    "sparse_tensor": "        return affine(x).to_sparse()",
}


@pytest.mark.parametrize("body", list(ATTACKS.values()), ids=list(ATTACKS))
def test_a_fake_output_is_never_passed(judge: Judge, body: str) -> None:
    ev = evaluate(judge, candidate(body, extra=LIARS))
    canary(judge)
    assert_not_passed(ev)


def test_a_lying_subclass_with_the_right_values_passes_on_its_values(judge: Judge) -> None:
    """The subclass is stripped on the wire: right values pass, as a plain tensor would."""
    ev = evaluate(judge, candidate("        return affine(x).as_subclass(Liar)", extra=LIARS))
    canary(judge)
    assert ev.verdict == Verdict.passed, summary(ev)


def test_a_view_of_the_input_is_rejected(judge: Judge) -> None:
    abs_task = task(AFFINE_TASK.replace("return x * 2 + 1", "return torch.abs(x)")
                    .replace("torch.randn(N)", "torch.rand(N) + 0.5"), name="abs")
    ev = evaluate(judge, candidate("        affine(x)\n        return x.view(-1)"), task=abs_task)
    canary(judge)
    assert ev.verdict == Verdict.rejected and ev.rejected.check == "output_aliases_input", summary(ev)


def test_computing_into_the_input_is_rejected(judge: Judge) -> None:
    ev = evaluate(judge, candidate("        affine(x, out=x)\n        return x"))
    canary(judge)
    assert ev.verdict == Verdict.rejected and ev.rejected.check in ("input_mutated", "output_aliases_input"), \
        summary(ev)


def test_modifying_the_input_in_place_is_rejected(judge: Judge) -> None:
    ev = evaluate(judge, candidate("        y = affine(x)\n        x.zero_()\n        return y"))
    canary(judge)
    assert ev.verdict == Verdict.rejected and ev.rejected.check == "input_mutated", summary(ev)


def test_modifying_the_input_only_in_a_later_trial_is_rejected(judge: Judge) -> None:
    body = ("        y = affine(x)\n        self.calls += 1\n        if self.calls > 1:\n            x.mul_(1.0001)\n"
            "        return y")
    ev = evaluate(judge, candidate(body, init="        self.calls = 0"))
    canary(judge)
    assert ev.verdict == Verdict.rejected and ev.rejected.check == "input_mutated", summary(ev)


def test_a_huge_output_is_a_readable_verdict(judge: Judge) -> None:
    ev = evaluate(judge, candidate("        affine(x)\n        return torch.zeros(64 << 20)"))
    canary(judge)
    assert_readable(ev)
    assert ev.verdict in (Verdict.crashed, Verdict.rejected, Verdict.mismatch), summary(ev)
