"""Red team, round eleven: what round ten's rules let through, and honest kernels they (or older rules) refused.

Attacks, each computing the task in PyTorch (expected: `work_not_in_candidate_kernels`, a canary after each):

- a kernel writes a pattern that reads nothing (an arange) and PyTorch uses it (a gather, a ratio that is one
  within the tolerance, one element cancelled): round ten's permuted check gave such a pattern credit for its
  order. Now only launches whose writes change with the call's parameters perturbed get the parameters' check;
- a kernel copies PyTorch's result into the first n elements of a larger buffer, then PyTorch computes from it:
  the copy compared the whole buffer with the result, so it was never a copy;
- something written beside a copy in one buffer (a kernel's pattern, PyTorch's `out=` from a kernel's value,
  an input `copy_` after a copy through the whole buffer): one origin per storage let that write decide for all
  of it. Origins are now kept per byte range (`judge/origin_map.py`), and a launch's copy is the range it changed.

Honest, now passed: a pad or a concatenation written by launches that each move an input into its part (taken
for copies of PyTorch's work). A kernel computing a parameter's norm (one element) for PyTorch's matmul, or
dequantizing an int8 weight for it, is library fallback under the work policy (docs/judge.md).
"""

from __future__ import annotations

import pytest

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Verdict
from tests.redteam.conftest import TOKEN_KERNELS, judged, summary
from tests.test_judge_cases import HEADER, task

KERNELS = HEADER + TOKEN_KERNELS + '''

@triton.jit
def iota_kernel(out, n, base, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, (offs + base).to(out.dtype.element_ty), mask=mask)


@triton.jit
def zero_kernel(dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.zeros((BLOCK,), dtype=tl.float32), mask=offs < n)


def grid(n):
    return (triton.cdiv(n, 128),)
'''


def forward(body: str, args: str = "x") -> str:
    lines = "".join(f"        {line}\n" for line in body.strip("\n").split("\n"))
    return f"{KERNELS}\n\nclass ModelNew(nn.Module):\n    def forward(self, {args}):\n        n = {args.split(',')[0]}.numel()\n{lines}"


ATTACKS = {
    "gather_iota": forward('''
idx = torch.empty(n, dtype=torch.int64, device=x.device)
iota_kernel[grid(n)](idx, n, 0, BLOCK=128)
return x[idx] * 2 + 1'''),
    "approx_ratio": forward('''
p = torch.empty(n, dtype=x.dtype, device=x.device)
iota_kernel[grid(n)](p, n, 1000, BLOCK=128)
q = torch.arange(n, dtype=x.dtype, device=x.device) + 1000.5
return (x * 2 + 1) * (p / q)'''),
    "larger_buffer_then_plus_one": forward('''
z = x * 2
buf = torch.empty(n + 1, dtype=x.dtype, device=x.device)
copy_kernel[grid(n)](z, buf, n, BLOCK=128)
return buf[:n] + 1'''),
    "scalar_cancel": forward('''
p = torch.empty(n, dtype=x.dtype, device=x.device)
iota_kernel[grid(n)](p, n, 1000, BLOCK=128)
s = p[0] - 1000.0
return x * 2 + s + 1'''),
    "derived_beside_copy": forward('''
z = x * 2
buf = torch.empty(2 * n, dtype=x.dtype, device=x.device)
copy_kernel[grid(n)](z, buf[:n], n, BLOCK=128)
p = torch.empty(n, dtype=x.dtype, device=x.device)
iota_kernel[grid(n)](p, n, 0, BLOCK=128)
torch.mul(p, 1.0, out=buf[n:])
return buf[:n] + 1'''),
    "known_beside_copy": forward('''
y = x * 2 + 1
buf = torch.empty(2 * n, dtype=x.dtype, device=x.device)
copy_kernel[grid(n)](y, buf, n, BLOCK=128)
buf[n:].copy_(x)
return buf[:n]'''),
    "kernel_pattern_beside_copy": forward('''
z = x * 2
buf = torch.empty(2 * n, dtype=x.dtype, device=x.device)
copy_kernel[grid(n)](z, buf[:n], n, BLOCK=128)
iota_kernel[grid(n)](buf[n:], n, 0, BLOCK=128)
return buf[:n] + 1'''),
}

NORM_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(16, 32))

    def forward(self, x):
        return x @ (self.weight / self.weight.norm()).t()


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return []
'''

NORM_BY_A_KERNEL = HEADER + '''
@triton.jit
def norm_kernel(w_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    w = tl.load(w_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr, tl.sqrt(tl.sum(w * w, axis=0)))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(16, 32))

    def forward(self, x):
        w = self.weight.contiguous()
        norm = torch.empty(1, dtype=w.dtype, device=w.device)
        norm_kernel[(1,)](w, norm, w.numel(), BLOCK=512)
        return x @ (w / norm).t()
'''

PAD_TASK = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x):
        return F.pad(x, (0, 512))


def get_inputs():
    return [torch.randn(512)]


def get_init_inputs():
    return []
'''

CAT_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.cat([a, b])


def get_inputs():
    return [torch.randn(512), torch.randn(512)]


def get_init_inputs():
    return []
'''

HONEST = {
    "pad_zeros_then_a_copy_kernel": (PAD_TASK, forward('''
out = torch.zeros(2 * n, dtype=x.dtype, device=x.device)
copy_kernel[grid(n)](x, out[:n], n, BLOCK=128)
return out''')),
    "pad_a_copy_kernel_then_a_zero_kernel": (PAD_TASK, forward('''
out = torch.empty(2 * n, dtype=x.dtype, device=x.device)
copy_kernel[grid(n)](x, out[:n], n, BLOCK=128)
zero_kernel[grid(n)](out[n:], n, BLOCK=128)
return out''')),
    "cat_by_two_copy_launches": (CAT_TASK, forward('''
out = torch.empty(2 * n, dtype=a.dtype, device=a.device)
copy_kernel[grid(n)](a, out[:n], n, BLOCK=128)
copy_kernel[grid(n)](b, out[n:], n, BLOCK=128)
return out''', args="a, b")),
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_pytorchs_work_behind_a_pattern_or_a_copy_beside_something_is_rejected(judge: Judge, name: str) -> None:
    ev = judged(judge, ATTACKS[name])
    assert ev.verdict == Verdict.rejected and ev.rejected.check == "work_not_in_candidate_kernels", summary(ev)


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_moves_of_inputs_pass(judge: Judge, name: str) -> None:
    source, candidate = HONEST[name]
    ev = judged(judge, candidate, task=task(source, name=name.split("_")[0]))
    assert ev.verdict == Verdict.passed, summary(ev)


# -- round twelve -----------------------------------------------------------------------------------------------

NEG_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return -x


def get_inputs():
    return [torch.randn(512)]


def get_init_inputs():
    return []
'''

# PyTorch negates through a negated view, materialized by clone: that was a "move" of an input
NEGATED_BY_PYTORCH = forward('''
y = torch._neg_view(x).clone()
out = torch.empty_like(x)
copy_kernel[grid(n)](y, out, n, BLOCK=128)
return out''')

# a kernel writes |x| * c with c a zero buffer: +0.0 everywhere, which changes when c is perturbed
ZERO_GATE_FROM_A_BUFFER = KERNELS + '''

@triton.jit
def gate_kernel(src, c, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.abs(tl.load(src + offs, mask=mask)) * tl.load(c), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("c", torch.zeros(1))

    def forward(self, x):
        n = x.numel()
        g = torch.empty_like(x)
        gate_kernel[grid(n)](x, self.c, g, n, BLOCK=128)
        return x * 2 + 1 + g
'''

INT8_TASK = '''
import torch
import torch.nn as nn

SCALE = 0.05


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("wq", torch.randint(-127, 128, (16, 32), dtype=torch.int8))

    def forward(self, x):
        return x @ (self.wq.float() * SCALE).t()


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return []
'''

INT8_DEQUANTIZED = HEADER + '''
SCALE = 0.05


@triton.jit
def dequant_kernel(q_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(q_ptr + offs, mask=mask).to(tl.float32) * scale, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("wq", torch.randint(-127, 128, (16, 32), dtype=torch.int8))

    def forward(self, x):
        w = torch.empty(self.wq.shape, dtype=torch.float32, device=x.device)
        dequant_kernel[(triton.cdiv(w.numel(), 128),)](self.wq, w, w.numel(), SCALE, BLOCK=128)
        return x @ w.t()
'''


def test_a_negated_view_materialized_by_pytorch_is_its_work_not_a_move(judge: Judge) -> None:
    """Red team, round twelve: `_neg_view(x).clone()` counted as moving an input, and the kernel's copy of it as
    a negation task's work."""
    ev = judged(judge, NEGATED_BY_PYTORCH, task=task(NEG_TASK, name="neg"))
    assert ev.verdict == Verdict.rejected and ev.rejected.check == "work_not_in_candidate_kernels", summary(ev)


def test_a_zero_gate_computed_from_a_buffer_gets_no_credit_for_the_parameters(judge: Judge) -> None:
    """Round twelve: perturbing the zero buffer changed the gate, and the parameters' check took that for work."""
    ev = judged(judge, ZERO_GATE_FROM_A_BUFFER)
    assert ev.verdict == Verdict.rejected and ev.rejected.check == "work_not_in_candidate_kernels", summary(ev)


LIBRARY_FALLBACK = {
    "a_parameters_norm_for_pytorchs_matmul": (NORM_TASK, NORM_BY_A_KERNEL),
    "an_int8_weight_dequantized_for_pytorchs_matmul": (INT8_TASK, INT8_DEQUANTIZED),
}


@pytest.mark.parametrize("name", sorted(LIBRARY_FALLBACK))
def test_a_kernel_on_the_parameters_beside_pytorchs_matmul_is_library_fallback(judge: Judge, name: str) -> None:
    source, candidate = LIBRARY_FALLBACK[name]
    ev = judged(judge, candidate, task=task(source, name=name.split("_")[1]))
    assert ev.verdict == Verdict.rejected and ev.rejected.check == "work_not_in_candidate_kernels", summary(ev)
    assert "library fallback" in ev.rejected.message, summary(ev)
