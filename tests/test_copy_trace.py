"""The copy trace: which launches count as copying a PyTorch result into the output (copy_trace.py).

Driven without Triton: `after` is what the launch hook calls once a candidate kernel returned, with the
kernel and its arguments, so a stand-in kernel and tensors the test computes itself show each case.
"""

from __future__ import annotations

import types

import torch

from adaexplore_mcp.judge.copy_trace import CopyTrace


def kernel(name: str) -> object:
    return types.SimpleNamespace(fn=types.SimpleNamespace(__name__=name))


def trace_for(x: torch.Tensor) -> CopyTrace:
    return CopyTrace([x, *torch.nn.Linear(4, 4).parameters()])


def test_a_kernel_that_copies_a_pytorch_result_into_the_output_is_named() -> None:
    x = torch.randn(64)
    trace = trace_for(x)
    y = x * 2 + 1  # PyTorch did the work
    out = torch.empty_like(y)
    out.copy_(y)  # what the copy kernel wrote
    trace.after(kernel("copy_kernel"), (y, out, y.numel()), {"BLOCK": 128})
    assert trace.pytorch_copy(out) == "copy_kernel"
    assert trace.pytorch_copy((out.view(8, 8),)) == "copy_kernel"  # a view of it, in a tuple


def test_real_work_in_place_work_and_copies_of_the_candidates_own_results_are_not_flagged() -> None:
    x = torch.randn(64)
    trace = trace_for(x)
    out = x * 2 + 1
    trace.after(kernel("affine_kernel"), (x, out, x.numel()), {})  # computed from the input: not equal
    assert trace.pytorch_copy(out) is None

    trace = trace_for(x)
    y = x * 2
    trace.after(kernel("add_one_inplace"), (y, y.numel()), {})  # one tensor argument: in place
    assert trace.pytorch_copy(y) is None

    trace = trace_for(x)
    first = x * 2 + 1
    trace.after(kernel("affine_kernel"), (x, first), {})  # the candidate's own result ...
    final = first.clone()
    trace.after(kernel("copy_kernel"), (first, final), {})  # ... copied by its own kernel
    assert trace.pytorch_copy(final) is None


def test_copies_of_an_input_or_a_parameter_and_constant_tensors_are_not_flagged() -> None:
    x = torch.randn(64)
    model = torch.nn.Linear(8, 8)
    trace = CopyTrace([x, *model.parameters()])
    out = x.clone()
    trace.after(kernel("copy_kernel"), (x, out), {})  # an identity task: the degenerate-task warning's job
    assert trace.pytorch_copy(out) is None
    w = model.weight.detach().reshape(-1).clone()
    trace.after(kernel("copy_kernel"), (model.weight, w), {})
    assert trace.pytorch_copy(w) is None

    trace = trace_for(x)
    acc, out = torch.zeros(64), torch.zeros(64)  # two zero-filled buffers are equal by chance, not a copy
    trace.after(kernel("reduce_kernel"), (acc, out), {})
    assert trace.pytorch_copy(out) is None


def test_an_output_written_after_the_copy_by_a_real_kernel_is_not_flagged() -> None:
    x = torch.randn(64)
    trace = trace_for(x)
    y = x * 2
    out = y.clone()
    trace.after(kernel("copy_kernel"), (y, out), {})
    out.add_(1)  # the kernel's real work, in place on the copy
    trace.after(kernel("add_one_inplace"), (out,), {})
    assert trace.pytorch_copy(out) is None
