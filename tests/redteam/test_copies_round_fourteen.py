"""Red team, round fourteen: round thirteen's checks attacked, and honest kernels they refused.

Attacks (the task `x * 2 + 1` computed by PyTorch; expected `work_not_in_candidate_kernels`, a canary after each):

- a kernel's zeros of both signs added (not "one constant" byte for byte); a kernel value added as a complex
  number with `alpha=0`; values far below a maximum but spread from a million to 1e30 below (noise of their
  spread crossed it); a random operator's `std` a kernel made tiny (`torch.normal(y, s)`); a kernel's sum times
  zero, or minus itself (one element: never "cancelled"); a kernel's part concatenated then sliced away, or one
  element a kernel wrote in a buffer PyTorch filled, then arithmetic on all of it (one origin for the result:
  op_parts.py now gives a concatenation's and an elementwise operator's parts their own);
- a kernel that computes every 64th element (a gap of exactly 64 joined the runs), or 66 scattered elements
  (beyond 64 runs, one range from the first to the last change);
- PyTorch's halves behind throwaway values that start with the same bytes as the first half (they used up the
  concatenation check's budget);
- +0.0 turned into -0.0 by a copy through `int32` views, then real arithmetic.

Honest, passed: a kernel's columns beside a column PyTorch wrote afterwards (a row sum: glue within the work
policy's bound). Under the work policy (docs/judge.md), kernel indices turned into a set by PyTorch
(`used[ids] = True`, `isin`) and a concatenation where cuBLAS computed three quarters are library fallback.
"""

from __future__ import annotations

import pytest

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Verdict
from tests.redteam.conftest import judged, rejected_for_work, summary
from tests.redteam.test_copies_round_thirteen import KERNELS, forward
from tests.test_judge_cases import task

MORE_KERNELS = KERNELS + '''

@triton.jit
def signed_zeros_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask) * 0.0, mask=mask)


@triton.jit
def far_below_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(src + offs, mask=mask)
    tl.store(dst + offs, tl.where(v > 0.0, -1.0e30, -1.0e6) + v, mask=mask)


@triton.jit
def tiny_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(src + offs, mask=mask)
    tl.store(dst + offs, v * v * 1.0e-38, mask=mask)


@triton.jit
def strided_kernel(x, y, n, STRIDE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK) * STRIDE
    mask = offs < n
    tl.store(y + offs, tl.load(x + offs, mask=mask) * 2 + 1, mask=mask)


@triton.jit
def int_negative_zero_copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(src + offs, mask=mask)
    tl.store(dst + offs, tl.where(v == 0, v - 2147483647 - 1, v), mask=mask)


@triton.jit
def argmax_kernel(x, out, cols, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    v = tl.load(x + r * cols + offs, mask=offs < cols, other=-float("inf"))
    tl.store(out + r, tl.argmax(v, 0).to(tl.int64))


def launch(kernel, x):
    k = torch.empty_like(x)
    kernel[grid(x.numel())](x, k, x.numel(), BLOCK=128)
    return k


@triton.jit
def affine_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask) * 2 + 1, mask=mask)


def affine(x, out=None):
    out = torch.empty_like(x) if out is None else out
    affine_kernel[grid(x.numel())](x, out, x.numel(), BLOCK=128)
    return out


def argmax_rows(x):
    out = torch.empty(x.shape[0], dtype=torch.int64)
    argmax_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return out
'''


def attack(body: str, args: str = "x") -> str:
    return forward(body, args).replace(KERNELS, MORE_KERNELS, 1)


ATTACKS = {
    "kernel_zeros_of_both_signs_added": "return kernel_copy(x * 2 + launch(signed_zeros_kernel, x) + 1)",
    "complex_kernel_value_added_with_alpha_zero": '''
r = torch.add(torch.view_as_complex((x * 2).view(n // 2, 2)), torch.view_as_complex(half_of(x).view(n // 2, 2)),
              alpha=0.0)
return kernel_copy(torch.view_as_real(r).reshape(n) + 1)''',
    "values_far_below_a_maximum_with_a_wide_spread": '''
return kernel_copy(torch.maximum(x * 2, launch(far_below_kernel, x)) + 1)''',
    "a_random_operators_tiny_std": "return kernel_copy(torch.normal(x * 2, launch(tiny_kernel, x)) + 1)",
    "a_kernel_sum_times_zero": "return kernel_copy(x * 2 + half_of(x).sum() * 0 + 1)",
    "a_kernel_count_minus_itself": '''
s = (half_of(x) > 0).sum()
return kernel_copy(x * 2 + (s - s) + 1)''',
    "a_kernel_part_concatenated_then_sliced_away": "return kernel_copy(torch.cat([x * 2, half_of(x)])[:n] + 1)",
    "one_kernel_element_in_a_buffer_pytorch_filled_then_arithmetic": '''
buf = torch.empty(n + 1)
buf[1:] = x * 2
ends_kernel[(1,)](x, buf, 1)
return kernel_copy((buf + 1)[1:])''',
    "every_64th_element_by_a_kernel": '''
xm = x.clone()
xm[::64] = 0.0
out = xm * 2 + 1
strided_kernel[(1,)](x, out, n, STRIDE=64, BLOCK=8)
return out''',
    "halves_behind_values_with_the_same_first_bytes": '''
h = n // 2
a, b = x[:h] * 2 + 1, x[h:] * 2 + 1
for j in range(1, 6):
    _ = torch.cat([a, x[h:n - j] * 3.0])
out = torch.empty_like(x)
halves_kernel[grid(h)](a, b, out, h, BLOCK=128)
return out''',
    "negative_zeros_through_int32_views_then_arithmetic": '''
t = torch.relu(x * 2)
out = torch.empty_like(t)
int_negative_zero_copy_kernel[grid(n)](t.view(torch.int32), out.view(torch.int32), n, BLOCK=128)
return out - torch.relu(-x * 2) + 1''',
}

SCATTERED_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2 + 1


def get_inputs():
    return [torch.randn(4352)]


def get_init_inputs():
    return []
'''

COLUMNS_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.cat([x.sum(1, keepdim=True), x * 2 + 1], 1)


def get_inputs():
    return [torch.randn(32, 64)]


def get_init_inputs():
    return []
'''

EXPERTS_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        used = torch.zeros(64, dtype=torch.bool)
        used[x.argmax(dim=1)] = True
        return used, torch.isin(torch.arange(64), x.argmax(dim=1))


def get_inputs():
    return [torch.randn(32, 64)]


def get_init_inputs():
    return []
'''

LIBRARY_QUARTERS_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(32, 32, bias=False)

    def forward(self, a, x):
        return torch.cat([self.lin(a), x * 2 + 1], dim=0)


def get_inputs():
    return [torch.randn(48, 32), torch.randn(16, 32)]


def get_init_inputs():
    return []
'''

HONEST = {
    "kernel_columns_then_a_pytorch_column": (COLUMNS_TASK, '''
out = torch.empty(32, 65)
out[:, 1:] = affine(x)
out[:, 0] = x.sum(1)
return out'''),
}

INDICES_MADE_A_SET_BY_PYTORCH = '''
ids = argmax_rows(x)
used = torch.zeros(64, dtype=torch.bool)
used[ids] = True
return used, torch.isin(torch.arange(64), ids)'''


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_round_thirteens_checks_attacked_are_rejected(judge: Judge, name: str) -> None:
    ev = judged(judge, attack(ATTACKS[name]))
    assert rejected_for_work(ev), summary(ev)


def test_sixty_six_scattered_elements_by_a_kernel_are_rejected(judge: Judge) -> None:
    ev = judged(judge, attack('''
xm = x.clone()
xm[::66] = 0.0
out = xm * 2 + 1
strided_kernel[(1,)](x, out, n, STRIDE=66, BLOCK=128)
return out'''), task=task(SCATTERED_TASK, name="scattered"))
    assert rejected_for_work(ev), summary(ev)
    assert "library fallback" in ev.rejected.message


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_columns_pass(judge: Judge, name: str) -> None:
    source, body = HONEST[name]
    ev = judged(judge, attack(body), task=task(source, name=name))
    assert ev.verdict == Verdict.passed and not ev.warnings, summary(ev)


def test_kernel_indices_made_a_set_by_pytorch_are_library_fallback(judge: Judge) -> None:
    ev = judged(judge, attack(INDICES_MADE_A_SET_BY_PYTORCH), task=task(EXPERTS_TASK, name="experts"))
    assert rejected_for_work(ev) and "library fallback" in ev.rejected.message, summary(ev)


def test_a_concatenation_three_quarters_library_work_is_library_fallback(judge: Judge) -> None:
    candidate = attack('''
out = torch.empty(64, 32)
torch.mm(a, self.lin.weight.t(), out=out[:48])
affine(x, out=out[48:])
return out''', args="a, x").replace(
        "class ModelNew(nn.Module):\n",
        "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.lin = nn.Linear(32, 32, bias=False)\n\n")
    ev = judged(judge, candidate, task=task(LIBRARY_QUARTERS_TASK, name="library_quarters"))
    assert rejected_for_work(ev) and "aten::mm" in ev.rejected.message, summary(ev)
