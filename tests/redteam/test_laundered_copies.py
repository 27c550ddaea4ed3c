"""Copies the copy check did not see (red team, round eight), and work checks a degenerate output switched off.

Each candidate computes the task in PyTorch and a kernel of its own only moves the result:

- then changes it in place by a no-op (`add_(0.0)`, `mul_(1.0)`): the in-place write made the output PyTorch's,
  and comparing it with what was moved compared it with itself;
- between two ranges of one argument (`buf[:n]` to `buf[n:]`, `buf` given once): the launch had no other
  argument to compare with;
- after 65 junk launches, each given a new PyTorch result: the list of PyTorch results the output was compared
  with stopped at 64, silently;
- a scalar (a loss): one element never counted as a copy;
- two halves PyTorch computed, laid end to end by a kernel;
- (round nine) mixed with zeros a kernel wrote (a buffer, one element) or shaped like a kernel's result, before
  or after the copy: any kernel result among an operator's inputs made its result the kernels' work; copied into
  a larger buffer, then cloned, or narrowed to float32 on the way; an input copied by a kernel, then PyTorch
  computing the whole result from the copy.
The copy trace now remembers every value PyTorch computed without the kernels by its digest, and follows a
moved value through PyTorch's operators (copy_trace.py).

Degenerate outputs (`probe.degenerate_outputs`): a task whose output is one scalar was degenerate (one value
per seed is "a constant"), and one degenerate output switched the work checks off for every output. Now a
constant must pass on every seed, and the checks judge the outputs that are not degenerate.

Expected: each attack rejected (`work_not_in_candidate_kernels`), a canary after each.
"""

from __future__ import annotations

import dataclasses

import pytest

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Verdict
from adaexplore_mcp.tasks.format import TaskSpec
from tests.redteam.conftest import TOKEN_KERNELS, judged, rejected_for_work, summary
from tests.redteam.test_hidden_copies import COPY_KERNEL, copier
from tests.test_judge_cases import AFFINE_KERNEL, HEADER, task

SELF_COPY = '''

@triton.jit
def self_copy_kernel(buf, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(buf + n + offs, tl.load(buf + offs, mask=mask), mask=mask)
'''

CAT = '''

@triton.jit
def cat_kernel(a, b, out, half, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    first = offs < half
    second = (offs >= half) & (offs < n)
    va = tl.load(a + offs, mask=first, other=0.0)
    vb = tl.load(b + offs - half, mask=second, other=0.0)
    tl.store(out + offs, tl.where(first, va, vb), mask=offs < n)
'''

CONVERT = '''

@triton.jit
def convert_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask).to(tl.float32), mask=mask)
'''

COPIES = {
    "then_add_zero_in_place": copier("        y = kernel_copy(x * 2 + 1)\n        y.add_(0.0)\n        return y"),
    "then_times_one_in_place": copier("        y = kernel_copy(x * 2 + 1)\n        y.mul_(1.0)\n        return y"),
    "then_arithmetic_in_pytorch": copier("        return kernel_copy(x * 2) + 1"),
    "between_ranges_of_one_argument": copier(
        "        n = x.numel()\n        buf = torch.empty(2 * n, dtype=x.dtype)\n        buf[:n] = x * 2 + 1\n"
        "        self_copy_kernel[grid(x)](buf, n, BLOCK=128)\n        return buf[n:]").replace(
        COPY_KERNEL, COPY_KERNEL + SELF_COPY),
    "concatenating_pytorch_halves": copier(
        "        n = x.numel()\n        h = n // 2\n        a = x[:h] * 2 + 1\n        b = x[h:] * 2 + 1\n"
        "        y = torch.empty_like(x)\n        cat_kernel[grid(x)](a, b, y, h, n, BLOCK=128)\n        return y").replace(
        COPY_KERNEL, COPY_KERNEL + CAT),
    # round nine: a kernel's zeros (a whole buffer, one element, or only its shape) mixed in by PyTorch
    "plus_a_kernels_zeros": copier(
        "        y = kernel_copy(x * 2 + 1)\n        g = torch.empty_like(x)\n"
        "        zero_kernel[grid(x)](g, x.numel(), BLOCK=128)\n        return y + g"),
    "plus_a_one_element_gate": copier(
        "        y = kernel_copy(x * 2 + 1)\n        flag = torch.empty(1, dtype=x.dtype)\n"
        "        boxed_zero_kernel[(1,)]((flag,))\n        return y + flag"),
    "plus_zeros_shaped_like_a_kernels_result": copier(
        "        y = kernel_copy(x * 2 + 1)\n        return y + torch.zeros_like(kernel_copy(x))"),
    "zeros_mixed_in_before_the_copy": copier(
        "        g = torch.empty_like(x)\n        zero_kernel[grid(x)](g, x.numel(), BLOCK=128)\n"
        "        return kernel_copy((x * 2 + g) + 1)"),
    "into_a_larger_buffer_then_cloned": copier(
        "        z = x * 2 + 1\n        n = x.numel()\n        buf = torch.empty(n + 1, dtype=x.dtype)\n"
        "        copy_kernel[grid(x)](z, buf, n, BLOCK=128)\n        return buf[:n].clone()"),
    "narrowed_into_a_larger_buffer": copier(
        "        z = x.double() * 2 + 1\n        n = x.numel()\n        buf = torch.empty(n + 1, dtype=torch.float32)\n"
        "        convert_kernel[grid(x)](z, buf, n, BLOCK=128)\n        return buf[:n]").replace(
        COPY_KERNEL, COPY_KERNEL + CONVERT),
    "an_input_copied_then_pytorch_computing": copier("        return kernel_copy(x) * 2 + 1"),
    "after_65_junk_launches": copier(
        "        for i in range(65):\n            kernel_copy(x + i)\n        return kernel_copy(x * 2 + 1).clone()"),
}

DOT_TASK = '''
import torch
import torch.nn as nn

N = 4096


class Model(nn.Module):
    def forward(self, a, b):
        return torch.sum(a * b)


def get_inputs():
    return [torch.randn(N), torch.randn(N)]


def get_init_inputs():
    return []
'''

DOT_BY_PYTORCH = {
    "next_to_a_token_kernel": HEADER + TOKEN_KERNELS + '''
class ModelNew(nn.Module):
    def forward(self, a, b):
        token(a)
        return torch.sum(a * b)
''',
    "moved_by_a_kernel": HEADER + TOKEN_KERNELS + '''
class ModelNew(nn.Module):
    def forward(self, a, b):
        s = torch.sum(a * b).reshape(1)
        out = torch.empty(1, dtype=a.dtype)
        copy_kernel[(1,)](s, out, 1, BLOCK=2)
        return out.reshape(())
'''}

WITH_A_TINY_OUTPUT = '''
import torch
import torch.nn as nn

N = 512


class Model(nn.Module):
    def forward(self, x):
        y = x * 2 + 1
        return y, y.mean() * 1e-3


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
'''


def probed(judge: Judge, spec: TaskSpec) -> TaskSpec:
    """The task as the app registers it: with what its probe found."""
    probe = judge.probe_task(spec)
    assert probe.ok, probe
    return dataclasses.replace(spec, degenerate=probe.degenerate, degenerate_outputs=tuple(probe.degenerate_outputs))


@pytest.mark.parametrize("name", sorted(COPIES))
def test_a_copy_laundered_on_its_way_out_is_rejected(judge: Judge, name: str) -> None:
    ev = judged(judge, COPIES[name])
    assert rejected_for_work(ev) and "aten::" in ev.rejected.message, summary(ev)  # the operator is named


def test_a_scalar_output_is_not_degenerate_and_pytorch_computing_it_is_caught(judge: Judge) -> None:
    spec = probed(judge, task(DOT_TASK, name="dot"))
    assert not spec.degenerate, spec
    for name, source in DOT_BY_PYTORCH.items():
        ev = judged(judge, source, task=spec)
        assert rejected_for_work(ev), (name, summary(ev))


def test_one_degenerate_output_leaves_the_work_checks_on_for_the_others(judge: Judge) -> None:
    spec = probed(judge, task(WITH_A_TINY_OUTPUT, name="with_a_tiny_output"))
    assert spec.degenerate and spec.degenerate_outputs == (1,), spec
    token = HEADER + TOKEN_KERNELS + '''
class ModelNew(nn.Module):
    def forward(self, x):
        token(x)
        y = x * 2 + 1
        return y, y.mean() * 1e-3
'''
    ev = judged(judge, token, task=spec)
    assert rejected_for_work(ev) and "output 0" in ev.rejected.message, summary(ev)
    honest = HEADER + AFFINE_KERNEL + '''
class ModelNew(nn.Module):
    def forward(self, x):
        y = affine(x)
        return y, y.mean() * 1e-3
'''
    ev = judged(judge, honest, task=spec)
    assert ev.verdict == Verdict.passed, summary(ev)


NEG_MATMUL_64 = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.neg(a @ b)


def get_inputs():
    return [torch.randn(16, 32, dtype=torch.float64), torch.randn(32, 16, dtype=torch.float64)]


def get_init_inputs():
    return []
'''

NEG_EPILOGUE = HEADER + '''
@triton.jit
def neg_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, -tl.load(src + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, a, b):
        h = a @ b
        y = torch.empty_like(h)
        neg_kernel[(triton.cdiv(h.numel(), 128),)](h, y, h.numel(), BLOCK=128)
        return y
'''

SWAP_HALVES = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.cat([x[:, 32:], x[:, :32]], dim=0)


def get_inputs():
    return [torch.randn(8, 64)]


def get_init_inputs():
    return []
'''

CAT_OF_CONTIGUOUS_SLICES = HEADER + CAT + '''

class ModelNew(nn.Module):
    def forward(self, x):
        a = x[:, 32:].contiguous()
        b = x[:, :32].contiguous()
        out = torch.empty((a.shape[0] + b.shape[0], a.shape[1]), dtype=x.dtype)
        cat_kernel[(triton.cdiv(out.numel(), 128),)](a, b, out, a.numel(), out.numel(), BLOCK=128)
        return out
'''


def test_pytorchs_contiguous_slices_of_the_input_laid_end_to_end_by_a_kernel_pass(judge: Judge) -> None:
    """PyTorch's `.contiguous()` copies of an input's slices, laid end to end by the task's concatenation kernel,
    are layout moves of the input: the kernel's work."""
    for _ in range(3):  # the digest's collisions depended on the inputs drawn
        ev = judged(judge, CAT_OF_CONTIGUOUS_SLICES, task=task(SWAP_HALVES, name="swap_halves"))
        assert ev.verdict == Verdict.passed, summary(ev)


def test_a_kernel_negating_pytorchs_float64_matmul_is_library_fallback(judge: Judge) -> None:
    ev = judged(judge, NEG_EPILOGUE, task=task(NEG_MATMUL_64, name="neg_matmul64"))
    assert rejected_for_work(ev) and "aten::mm" in ev.rejected.message, summary(ev)
