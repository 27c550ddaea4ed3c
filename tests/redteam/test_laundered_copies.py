"""Copies the copy check did not see (red team, round eight), and work checks a degenerate output switched off.

Each candidate computes the task in PyTorch and a kernel of its own only moves the result:

- then changes it in place by a no-op (`add_(0.0)`, `mul_(1.0)`): the in-place write made the output PyTorch's,
  and comparing it with what was moved compared it with itself;
- between two ranges of one argument (`buf[:n]` to `buf[n:]`, `buf` given once): the launch had no other
  argument to compare with;
- after 65 junk launches, each given a new PyTorch result: the list of PyTorch results the output was compared
  with stopped at 64, silently;
- a scalar (a loss): one element never counted as a copy;
- two halves PyTorch computed, laid end to end by a kernel.
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
from tests.redteam.conftest import TOKEN_KERNELS, canary, evaluate, summary
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


def judged(judge: Judge, source: str, **kw: object):  # noqa: ANN201 - an Evaluation
    ev = evaluate(judge, source, **kw)
    canary(judge)
    return ev


def probed(judge: Judge, spec: TaskSpec) -> TaskSpec:
    """The task as the app registers it: with what its probe found."""
    probe = judge.probe_task(spec)
    assert probe.ok, probe
    return dataclasses.replace(spec, degenerate=probe.degenerate, degenerate_outputs=tuple(probe.degenerate_outputs))


def rejected_for_work(ev) -> bool:  # noqa: ANN001
    return ev.verdict == Verdict.rejected and ev.rejected is not None and \
        ev.rejected.check == "work_not_in_candidate_kernels"


@pytest.mark.parametrize("name", sorted(COPIES))
def test_a_copy_laundered_on_its_way_out_is_rejected(judge: Judge, name: str) -> None:
    ev = judged(judge, COPIES[name])
    assert rejected_for_work(ev) and "copied" in ev.rejected.message, summary(ev)


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
    assert rejected_for_work(ev) and "outputs [0]" in ev.rejected.message, summary(ev)
    honest = HEADER + AFFINE_KERNEL + '''
class ModelNew(nn.Module):
    def forward(self, x):
        y = affine(x)
        return y, y.mean() * 1e-3
'''
    ev = judged(judge, honest, task=spec)
    assert ev.verdict == Verdict.passed, summary(ev)
