"""Copies the copy check did not see (red team, round ten), and honest kernels it judged wrong.

Each attack computes the task in PyTorch and has a kernel of its own only move the result, then:

- writes something else beside the copy, in the same buffer: PyTorch copying an input there (`copy_`), computing
  into it (`out=`), filling it (`fill_`), or a kernel writing zeros there. The copy trace keeps one origin per
  storage, and the write made the whole buffer PyTorch's (or an input's): the copy in the other half was
  forgotten. A write that reaches only part of a buffer now leaves a copy in it a copy;
- has a kernel turn PyTorch's float result into integers (a float argmax into int64): conversions across kinds
  were not moves.

Honest: a kernel that converts an input to another dtype (the task `x.to(torch.float32)`, or a clamp that the
data never reaches) was rejected as "only copied values PyTorch computed": an input in another dtype is the
task's own output. A Triton dtype passed to a launch as a constexpr (`OUT=tl.float16`, the `_TL_DTYPE[x.dtype]`
idiom) made the call "not replayable". A kernel that works on the parameters alone (a weight standardized before
PyTorch's matmul) is library fallback under the work policy (docs/judge.md): PyTorch's matmul does the work.

Expected: the attacks rejected (`work_not_in_candidate_kernels`), the honest ones passed; a canary after each.
"""

from __future__ import annotations

import pytest

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Verdict
from tests.redteam.conftest import judged, rejected_for_work, summary
from tests.redteam.test_hidden_copies import copier
from tests.test_judge_cases import HEADER, task

BESIDE = ("        n = x.numel()\n        y = x * 2 + 1\n        buf = torch.empty(2 * n, dtype=x.dtype)\n"
          "        copy_kernel[grid(x)](y, buf[:n], n, BLOCK=128)\n{beside}\n        return {out}")

COPIES = {
    "pytorch_copies_an_input_beside_it": copier(BESIDE.format(beside="        buf[n:].copy_(x)", out="buf[:n].clone()")),
    "pytorch_computes_beside_it_with_out": copier(
        BESIDE.format(beside="        torch.mul(x, 3, out=buf[n:])", out="buf[:n].clone()")),
    "pytorch_fills_beside_it": copier(BESIDE.format(beside="        buf[n:].fill_(0.0)", out="buf[:n].clone()")),
    "returned_as_a_view_after_a_copy_beside_it": copier(BESIDE.format(beside="        buf[n:].copy_(x)", out="buf[:n]")),
    "a_kernel_fills_beside_it": copier(
        BESIDE.format(beside="        zero_kernel[grid(x)](buf[n:], n, BLOCK=128)", out="buf[:n].clone()")),
}

ARGMAX_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.argmax(x, dim=1)


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
'''

FLOAT_ARGMAX_TO_INT = HEADER + '''
@triton.jit
def to_int_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask).to(tl.int64), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        m = torch.amax(x, dim=1, keepdim=True)
        cols = torch.arange(x.shape[1], device=x.device, dtype=torch.float32)
        idx = ((x == m).float() * cols).sum(dim=1)
        out = torch.empty(x.shape[0], dtype=torch.int64, device=x.device)
        to_int_kernel[(triton.cdiv(out.numel(), 128),)](idx, out, out.numel(), BLOCK=128)
        return out
'''

UPCAST_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return {body}


def get_inputs():
    return [torch.randn(512).half()]


def get_init_inputs():
    return []
'''

UPCAST = HEADER + '''
@triton.jit
def upcast_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(src + offs, mask=mask).to(tl.float32)
    tl.store(dst + offs, tl.minimum(tl.maximum(v, -100.0), 100.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty(x.shape, dtype=torch.float32, device=x.device)
        upcast_kernel[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), BLOCK=128)
        return y
'''

SIGMOID_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.sigmoid(x) * 2


def get_inputs():
    return [torch.randn(512)]


def get_init_inputs():
    return []
'''

DTYPE_CONSTEXPR = HEADER + '''
_TL_DTYPE = {torch.float32: tl.float32, torch.float64: tl.float64}


@triton.jit
def sigmoid2_kernel(x_ptr, y_ptr, n, OUT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (tl.sigmoid(x) * 2.0).to(OUT), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        sigmoid2_kernel[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), OUT=_TL_DTYPE[x.dtype], BLOCK=128)
        return y
'''


WEIGHT_STANDARDIZED_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(16, 32))

    def forward(self, x):
        w = self.weight
        w = (w - w.mean(dim=1, keepdim=True)) / (w.std(dim=1, keepdim=True, unbiased=False) + 1e-5)
        return x @ w.t()


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return []
'''

WEIGHT_STANDARDIZED = HEADER + '''
@triton.jit
def standardize_rows(w_ptr, out_ptr, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    w = tl.load(w_ptr + row * cols + offs, mask=mask, other=0.0)
    d = tl.where(mask, w - tl.sum(w, axis=0) / cols, 0.0)
    tl.store(out_ptr + row * cols + offs, d / (tl.sqrt(tl.sum(d * d, axis=0) / cols) + eps), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(16, 32))

    def forward(self, x):
        w = self.weight.contiguous()
        ws = torch.empty_like(w)
        standardize_rows[(w.shape[0],)](w, ws, w.shape[1], 1e-5, BLOCK=32)
        return x @ ws.t()
'''

# The parameters' kernel writes a fixed pattern that PyTorch's own copy of it cancels: the work is PyTorch's
PATTERN_CANCELLED = HEADER + '''
@triton.jit
def double_kernel(w_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(w_ptr + offs, mask=mask) * 2.0, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(16, 32))

    def forward(self, x):
        w = self.weight
        ws = (w - w.mean(dim=1, keepdim=True)) / (w.std(dim=1, keepdim=True, unbiased=False) + 1e-5)
        p = torch.empty_like(w)
        double_kernel[(triton.cdiv(w.numel(), 128),)](w, p, w.numel(), BLOCK=128)
        return x @ (ws + (p - w * 2.0)).t()
'''


@pytest.mark.parametrize("name", sorted(COPIES))
def test_a_copy_with_something_else_written_beside_it_is_rejected(judge: Judge, name: str) -> None:
    ev = judged(judge, COPIES[name])
    assert rejected_for_work(ev) and "aten::" in ev.rejected.message, summary(ev)  # the operator is named


def test_pytorchs_float_argmax_converted_to_int64_by_a_kernel_is_rejected(judge: Judge) -> None:
    ev = judged(judge, FLOAT_ARGMAX_TO_INT, task=task(ARGMAX_TASK, name="argmax"))
    assert rejected_for_work(ev), summary(ev)


@pytest.mark.parametrize("body", ["x.to(torch.float32)", "torch.clamp(x.float(), -100, 100)"],
                         ids=["upcast", "clamp_never_reached"])
def test_a_kernel_converting_an_input_to_another_dtype_passes(judge: Judge, body: str) -> None:
    ev = judged(judge, UPCAST, task=task(UPCAST_TASK.format(body=body), name="upcast"))
    assert ev.verdict == Verdict.passed and not ev.warnings, summary(ev)


def test_a_triton_dtype_passed_as_a_constexpr_is_replayed(judge: Judge) -> None:
    ev = judged(judge, DTYPE_CONSTEXPR, task=task(SIGMOID_TASK, name="sigmoid2"))
    assert ev.verdict == Verdict.passed and not ev.warnings, summary(ev)
    assert ev.work is not None and ev.work["replay"]["check"] == "substituted", ev.work


def test_a_kernel_on_the_parameters_beside_pytorchs_matmul_is_library_fallback(judge: Judge) -> None:
    ev = judged(judge, WEIGHT_STANDARDIZED, task=task(WEIGHT_STANDARDIZED_TASK, name="weight_standardized"))
    assert rejected_for_work(ev) and "aten::mm" in ev.rejected.message, summary(ev)


def test_a_parameters_kernel_whose_pattern_pytorch_cancels_is_rejected(judge: Judge) -> None:
    """PyTorch standardizes the weight and multiplies: library fallback, whatever the kernel's pattern."""
    ev = judged(judge, PATTERN_CANCELLED, task=task(WEIGHT_STANDARDIZED_TASK, name="weight_standardized"))
    assert rejected_for_work(ev) and "library fallback" in ev.rejected.message, summary(ev)
