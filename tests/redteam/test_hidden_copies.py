"""Copies the copy check did not see (red team, round seven), and two honest candidates it judged wrong.

Each candidate computes the task in PyTorch and has a kernel of its own only move the result:

- through tensors its launch is given inside a tuple, or inside a host-side TensorDescriptor: the replay's
  capture, its substitution and the copy trace looked only at top-level tensor arguments, so a write through
  them was never put back and the output "depended" on the kernel (tensor_args.launch_tensors walks them now);
- PyTorch computes into a buffer made before the call (`out=` a registered buffer), or into one a kernel had
  zeroed, and a kernel copies it: in-place and `out=` writes of ATen operators now make a storage PyTorch's;
- the moved result goes through a PyTorch operator that keeps its values (`.clone()`, `+ 0`) on its way out:
  an output PyTorch made is compared with what the kernels only moved.

And two honest candidates the judge got wrong: a task whose `get_inputs()` holds a list of tensors was
rejected as not replayable (the record gave nested tensors no slot), and on the CPU a task whose inputs are
much larger than its output was judged `crashed` (the trials' reply limit counted nested inputs as no bytes).

Expected: the copies rejected (`work_not_in_candidate_kernels`), the honest ones passed; a canary after each.
"""

from __future__ import annotations

import pytest

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Verdict
from tests.redteam.conftest import TOKEN_KERNELS, judged, summary
from tests.test_judge_cases import HEADER, task

COPY_KERNEL = TOKEN_KERNELS + '''

@triton.jit
def zero_kernel(dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.zeros((BLOCK,), dtype=tl.float32), mask=offs < n)


@triton.jit
def pair_copy_kernel(pair, n, BLOCK: tl.constexpr):
    src = pair[0]
    dst = pair[1]
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


@triton.jit
def boxed_zero_kernel(box):
    tl.store(box[0], 0.0)


def grid(x):
    return (triton.cdiv(x.numel(), 128),)
'''


def copier(body: str, init: str = "") -> str:
    init_block = f"    def __init__(self):\n        super().__init__()\n{init}\n" if init else ""
    return f"{HEADER}{COPY_KERNEL}\n\nclass ModelNew(nn.Module):\n{init_block}    def forward(self, x):\n{body}\n"


COPIES = {
    "through_a_tuple": copier(
        "        z = x * 2 + 1\n        y = torch.empty_like(x)\n"
        "        pair_copy_kernel[grid(x)]((z, y), x.numel(), BLOCK=128)\n        return y"),
    "into_a_buffer_made_before_the_call": copier(
        "        torch.mul(x, 2, out=self.scratch)\n        self.scratch.add_(1)\n        y = torch.empty_like(x)\n"
        "        copy_kernel[grid(x)](self.scratch, y, x.numel(), BLOCK=128)\n        return y",
        init="        self.register_buffer('scratch', torch.zeros(512))"),
    "into_a_buffer_a_kernel_zeroed": copier(
        "        w = torch.empty_like(x)\n        zero_kernel[grid(x)](w, x.numel(), BLOCK=128)\n"
        "        torch.mul(x, 2, out=w)\n        w.add_(1)\n        y = torch.empty_like(x)\n"
        "        copy_kernel[grid(x)](w, y, x.numel(), BLOCK=128)\n        return y"),
    "then_cloned": copier(
        "        return kernel_copy(x * 2 + 1).clone()"),
    "then_plus_zero": copier(
        "        return kernel_copy(x * 2 + 1) + 0"),
}

GATE_IN_A_TUPLE = copier(
    "        flag = torch.empty(1, dtype=x.dtype)\n        boxed_zero_kernel[(1,)]((flag,))\n        return x * 2 + 1 + flag")

DESCRIPTOR_COPY = HEADER + '''
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def descriptor_copy_kernel(src_desc, dst_desc, BLOCK: tl.constexpr):
    off = tl.program_id(0) * BLOCK
    dst_desc.store([off], src_desc.load([off]))


class ModelNew(nn.Module):
    def forward(self, x):
        z = x * 2 + 1
        y = torch.empty_like(x)
        descriptor_copy_kernel[(triton.cdiv(x.numel(), 128),)](TensorDescriptor.from_tensor(z, [128]),
                                                               TensorDescriptor.from_tensor(y, [128]), BLOCK=128)
        return y
'''

LIST_TASK = '''
import torch
import torch.nn as nn

N = 512


class Model(nn.Module):
    def forward(self, xs):
        return xs[0] * 2 + xs[1]


def get_inputs():
    return [[torch.randn(N), torch.randn(N)]]


def get_init_inputs():
    return []
'''

LIST_KERNEL = HEADER + '''
@triton.jit
def axpy_kernel(a_ptr, b_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(a_ptr + offs, mask=mask) * 2 + tl.load(b_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, xs):
        a, b = xs
        y = torch.empty_like(a)
        axpy_kernel[(triton.cdiv(a.numel(), 128),)](a, b, y, a.numel(), BLOCK=128)
        return y
'''

MEAN_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.mean(x, dim=1)


def get_inputs():
    return [torch.randn(16, 65536)]


def get_init_inputs():
    return []
'''

MEAN_KERNEL = HEADER + '''
@triton.jit
def mean_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for c0 in range(0, cols, BLOCK):
        offs = c0 + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=0.0)
    tl.store(y_ptr + row, tl.sum(acc, axis=0) / cols)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty(x.shape[0], dtype=x.dtype)
        mean_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=4096)
        return y
'''


@pytest.mark.parametrize("name", sorted(COPIES))
def test_a_copy_the_copy_check_did_not_see_is_rejected(judge: Judge, name: str) -> None:
    ev = judged(judge, COPIES[name])
    assert ev.verdict == Verdict.rejected and ev.rejected is not None, summary(ev)
    assert ev.rejected.check == "work_not_in_candidate_kernels" and "aten::" in ev.rejected.message, summary(ev)


def test_a_copy_through_a_tensor_descriptor_is_rejected(judge: Judge) -> None:
    ev = judged(judge, DESCRIPTOR_COPY)
    assert ev.verdict == Verdict.rejected and ev.rejected is not None, summary(ev)
    assert ev.rejected.check == "work_not_in_candidate_kernels", summary(ev)


def test_a_gate_written_through_a_tuple_is_rejected(judge: Judge) -> None:
    ev = judged(judge, GATE_IN_A_TUPLE)
    assert ev.verdict == Verdict.rejected and ev.rejected is not None, summary(ev)
    assert ev.rejected.check == "work_not_in_candidate_kernels", summary(ev)


def test_an_honest_kernel_on_a_list_of_input_tensors_passes(judge: Judge) -> None:
    ev = judged(judge, LIST_KERNEL, task=task(LIST_TASK, name="list_inputs"))
    assert ev.verdict == Verdict.passed, summary(ev)
    assert ev.work and ev.work["replay"]["check"] == "substituted", ev.work


def test_writing_into_a_tensor_inside_a_list_input_is_seen(judge: Judge) -> None:
    ev = judged(judge, LIST_KERNEL.replace("y = torch.empty_like(a)", "y = b"), task=task(LIST_TASK, name="list_inputs"))
    assert ev.verdict == Verdict.rejected and ev.rejected is not None, summary(ev)
    assert ev.rejected.check in ("output_aliases_input", "input_mutated"), summary(ev)


def test_an_honest_kernel_on_inputs_much_larger_than_its_output_passes(judge: Judge) -> None:
    ev = judged(judge, MEAN_KERNEL, task=task(MEAN_TASK, name="mean_rows"))
    assert ev.verdict == Verdict.passed, summary(ev)


SCALED_BY_A_DRAWN_NUMBER = '''
import torch
import torch.nn as nn

N = 512


class Model(nn.Module):
    def forward(self, x, alpha):
        return x * alpha + 1


def get_inputs():
    return [torch.randn(N), float(torch.rand(()) * 4 + 1)]


def get_init_inputs():
    return []
'''

SCALE_KERNEL = HEADER + '''
@triton.jit
def scale_kernel(x_ptr, y_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha + 1, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x, alpha):
        y = torch.empty_like(x)
        scale_kernel[(triton.cdiv(x.numel(), 128),)](x, y, alpha, x.numel(), BLOCK=128)
        return y
'''


def test_a_number_drawn_by_get_inputs_is_the_replayed_trials_in_the_replay(judge: Judge) -> None:
    """Red team, round eight: an honest kernel taking a scale `get_inputs()` draws at random was rejected as not
    replayable: the record holds the trial's number, the replay's new inputs drew another (host_inputs.py). A
    copy of PyTorch's result is still found on such a task."""
    spec = task(SCALED_BY_A_DRAWN_NUMBER, name="scaled_by_a_drawn_number")
    ev = judged(judge, SCALE_KERNEL, task=spec)
    assert ev.verdict == Verdict.passed, summary(ev)
    copy = HEADER + TOKEN_KERNELS + "\n\nclass ModelNew(nn.Module):\n    def forward(self, x, alpha):\n" \
        "        return kernel_copy(x * alpha + 1)\n"
    ev = judged(judge, copy, task=spec)
    assert ev.verdict == Verdict.rejected and ev.rejected is not None, summary(ev)
    assert ev.rejected.check == "work_not_in_candidate_kernels", summary(ev)
