"""Red team, round thirteen: PyTorch's answer moved by a kernel past what rounds ten to twelve checked.

Each attack computes the task (`x * 2 + 1`, or a ReLU of it) in PyTorch; expected: `work_not_in_candidate_kernels`,
a canary after each.

- written through an alias (`torch.from_numpy(buf.numpy())`, the replay's `set_()`) or into memory freed and
  allocated again: a tensor's `_version` started over at 0, the answer repeated the mark of the value before it
  and was never remembered. Values are now marked by the writes seen to their memory (OriginMap.generation);
- a copy kernel that overwrites its source after reading it: the copy was compared with the source afterwards.
  It is now compared with the bytes the launch read (the capture's snapshot);
- five throwaway values just smaller than the output, made before PyTorch's halves: the concatenation check
  tried the largest sizes first within a budget, and never reached the halves. Pieces are now looked up by
  their first bytes;
- +0.0 turned into -0.0 by the "copy": byte comparisons took it for new values;
- a kernel's value mixed in to no effect (`alpha=0`, `* 1e-30`, a maximum with something a million below):
  the result counted as the kernel's. Such operators now run again with the kernel's values changed
  (op_sensitivity.py), and a result that does not change is PyTorch's;
- a kernel that computes one or two elements while PyTorch computes (or a kernel copies) the rest: the launch's
  range ran from its first change to its last. Changes are now kept as runs, and an output the kernels computed
  under an eighth of (beside PyTorch's values) is rejected.

PyTorch's matmul then a ReLU kernel: library fallback under the work policy (docs/judge.md), rejected naming
`aten::mm`.
"""

from __future__ import annotations

import pytest

from adaexplore_mcp.judge import Judge
from tests.redteam.conftest import TOKEN_KERNELS, judged, rejected_for_work, summary
from tests.test_judge_cases import HEADER, task

KERNELS = HEADER + TOKEN_KERNELS + '''

@triton.jit
def scale_kernel(src, dst, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask) * factor, mask=mask)


@triton.jit
def copy_then_overwrite_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(src + offs, mask=mask)
    tl.store(dst + offs, v, mask=mask)
    tl.store(src + offs, v * 3.0 + 5.0, mask=mask)


@triton.jit
def halves_kernel(a, b, dst, h, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < h
    tl.store(dst + offs, tl.load(a + offs, mask=mask), mask=mask)
    tl.store(dst + h + offs, tl.load(b + offs, mask=mask), mask=mask)


@triton.jit
def negative_zero_copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(src + offs, mask=mask)
    tl.store(dst + offs, tl.where(v == 0.0, v * -1.0, v), mask=mask)


@triton.jit
def ends_kernel(x, y, n):
    tl.store(y, tl.load(x) * 2 + 1)
    tl.store(y + n - 1, tl.load(x + n - 1) * 2 + 1)


@triton.jit
def relu_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.maximum(tl.load(src + offs, mask=mask), 0.0), mask=mask)


def grid(n):
    return (triton.cdiv(n, 128),)


def half_of(x):
    k = torch.empty_like(x)
    scale_kernel[grid(x.numel())](x, k, x.numel(), 0.5, BLOCK=128)
    return k
'''


def forward(body: str, args: str = "x") -> str:
    lines = "".join(f"        {line}\n" for line in body.strip("\n").split("\n"))
    return f"{KERNELS}\n\nclass ModelNew(nn.Module):\n    def forward(self, {args}):\n        n = {args.split(',')[0]}.numel()\n{lines}"


ATTACKS = {
    "answer_written_through_a_numpy_alias": forward('''
buf = torch.empty(2 * n)
torch.mul(x, 3.0, out=buf[:n])
alias = torch.from_numpy(buf.numpy())
torch.add(x * 2, 1.0, out=alias[:n])
buf[n:].fill_(7.0)
out = torch.empty_like(x)
copy_kernel[grid(n)](buf, out, n, BLOCK=128)
return out'''),
    "alias_then_a_copy_that_overwrites_its_source": forward('''
buf = torch.empty(n)
torch.mul(x, 3.0, out=buf)
alias = torch.from_numpy(buf.numpy())
torch.add(x * 2, 1.0, out=alias)
out = torch.empty_like(x)
copy_then_overwrite_kernel[grid(n)](alias, out, n, BLOCK=128)
return out'''),
    "memory_freed_and_reused_then_overwritten": forward('''
one = torch.ones(1)
t = x * 3.0
t.resize_(4 * n)
y = torch.add(one, x, alpha=2)
out = torch.empty_like(x)
copy_then_overwrite_kernel[grid(n)](y, out, n, BLOCK=128)
return out'''),
    "halves_behind_throwaway_sizes": forward('''
h = n // 2
for j in range(1, 6):
    _ = x[:n - j] * 3.0
a, b = x[:h] * 2 + 1, x[h:] * 2 + 1
out = torch.empty_like(x)
halves_kernel[grid(h)](a, b, out, h, BLOCK=128)
return out'''),
    "kernel_value_added_with_alpha_zero": forward('''
return kernel_copy(torch.add(x * 2, half_of(x), alpha=0.0) + 1)'''),
    "kernel_value_scaled_to_nothing": forward('''
return kernel_copy(x * 2 + half_of(x) * 1e-30 + 1)'''),
    "kernel_value_far_below_a_maximum": forward('''
return kernel_copy(torch.maximum(x * 2, half_of(x) - 1e6) + 1)'''),
    "kernel_computes_the_two_ends": forward('''
out = torch.empty_like(x)
torch.add(x[1:n - 1] * 2, 1.0, out=out[1:n - 1])
ends_kernel[(1,)](x, out, n)
return out'''),
    "copy_of_all_but_one_element": forward('''
out = torch.empty_like(x)
copy_kernel[grid(n - 1)](x[:n - 1] * 2 + 1, out, n - 1, BLOCK=128)
ends_kernel[(1,)](x, out, n)
return out'''),
}

RELU_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x * 2 + 1)


def get_inputs():
    return [torch.randn(512)]


def get_init_inputs():
    return []
'''

MATMUL_RELU_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.relu(a @ b)


def get_inputs():
    return [torch.randn(16, 32), torch.randn(32, 24)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_pytorchs_answer_moved_past_round_twelves_checks_is_rejected(judge: Judge, name: str) -> None:
    ev = judged(judge, ATTACKS[name])
    assert rejected_for_work(ev), summary(ev)


def test_a_copy_that_only_flips_the_sign_of_zeros_is_rejected(judge: Judge) -> None:
    ev = judged(judge, forward('''
y = torch.relu(x * 2 + 1)
out = torch.empty_like(y)
negative_zero_copy_kernel[grid(n)](y, out, n, BLOCK=128)
return out'''), task=task(RELU_TASK, name="relu"))
    assert rejected_for_work(ev), summary(ev)


def test_pytorchs_matmul_then_a_relu_kernel_is_library_fallback(judge: Judge) -> None:
    ev = judged(judge, forward('''
h = a @ b
out = torch.empty_like(h)
relu_kernel[grid(h.numel())](h, out, h.numel(), BLOCK=128)
return out''', args="a, b"), task=task(MATMUL_RELU_TASK, name="matmul_relu"))
    assert rejected_for_work(ev) and "library fallback" in ev.rejected.message and "aten::mm" in ev.rejected.message, \
        summary(ev)
