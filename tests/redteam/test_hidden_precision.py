"""Computing below float32 without saying so: the flag must not depend on how the source names a dtype.

`precision.below_fp32` is what tells a user a speedup came from lower precision. Found by a red team (third
round): the source check only knew `torch.`/`tl.`/`triton.` spelled out, so an alias, a tensor type or an
imported dtype name passed unflagged. The source check now knows the names under any module, and the
recorded call (work_trace.py) is read too: a cast or an allocation below float32, whatever the source
says. Expected: passed (the values are within tolerance), flagged, canary clean.
"""

from __future__ import annotations

import pytest

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Verdict
from tests.redteam.conftest import canary, evaluate, summary
from tests.test_judge_cases import HEADER, candidate

IMPORTED_DTYPE = HEADER + '''
from triton.language import float16 as F16


@triton.jit
def affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(F16)
    tl.store(y_ptr + offs, x * 2 + 1, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        affine_kernel[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), BLOCK=128)
        return y
'''

HIDDEN = {
    "aliased_module": candidate("        return affine(x.to(th.float16)).to(x.dtype)", extra="\nimport torch as th\n"),
    "tensor_type": candidate("        return affine(x.type(torch.HalfTensor)).to(x.dtype)"),
    "imported_triton_dtype": IMPORTED_DTYPE,
    # no dtype name in the source at all: only the recorded call shows it
    "name_built_at_run_time": candidate("        low = getattr(torch, 'float' + str(8 * 2))\n"
                                        "        return affine(x.to(low)).to(x.dtype)"),
}


@pytest.mark.parametrize("name", sorted(HIDDEN))
def test_lower_precision_is_flagged_however_it_is_named(judge: Judge, name: str) -> None:
    ev = evaluate(judge, HIDDEN[name])
    canary(judge)
    assert ev.verdict == Verdict.passed, summary(ev)
    assert ev.precision.below_fp32 and ev.precision.reasons, ev.precision
