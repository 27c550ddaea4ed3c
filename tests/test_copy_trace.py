"""The copy trace: which launches count as copying a PyTorch result into the output (copy_trace.py).

Driven without Triton: `after` is what the launch hook calls once a candidate kernel returned, with the
kernel and its arguments, so a stand-in kernel and tensors the test computes itself show each case.
"""

from __future__ import annotations

import types

import torch

from adaexplore_mcp.judge.copy_trace import CopyTrace, storage_key


def kernel(name: str) -> object:
    return types.SimpleNamespace(fn=types.SimpleNamespace(__name__=name))


def trace_for(x: torch.Tensor) -> CopyTrace:
    model = torch.nn.Linear(4, 4)
    trace = CopyTrace([x, *model.parameters()])
    trace.model = model  # type: ignore[attr-defined] # alive as in a replay: a freed parameter's address is reused
    return trace


def test_a_kernel_that_copies_a_pytorch_result_into_the_output_is_named() -> None:
    x = torch.randn(64)
    trace = trace_for(x)
    y = x * 2 + 1  # PyTorch did the work
    out = torch.empty_like(y)
    out.copy_(y)  # what the copy kernel wrote
    trace.after(kernel("copy_kernel"), (y, out, y.numel()), {"BLOCK": 128})
    assert trace.pytorch_copies(out) == {0: "copy_kernel"}
    assert trace.pytorch_copies((x, out.view(8, 8))) == {1: "copy_kernel"}  # a view of it, in a tuple


def test_real_work_in_place_work_and_copies_of_the_candidates_own_results_are_not_flagged() -> None:
    x = torch.randn(64)
    trace = trace_for(x)
    out = x * 2 + 1
    trace.after(kernel("affine_kernel"), (x, out, x.numel()), {})  # computed from the input: not equal
    assert trace.pytorch_copies(out) == {}

    trace = trace_for(x)
    y = x * 2
    trace.after(kernel("add_one_inplace"), (y, y.numel()), {})  # one tensor argument: in place
    assert trace.pytorch_copies(y) == {}

    trace = trace_for(x)
    first = x * 2 + 1
    trace.after(kernel("affine_kernel"), (x, first), {})  # the candidate's own result ...
    final = first.clone()
    trace.after(kernel("copy_kernel"), (first, final), {})  # ... copied by its own kernel
    assert trace.pytorch_copies(final) == {}


def test_copies_of_an_input_or_a_parameter_and_constant_tensors_are_not_flagged() -> None:
    x = torch.randn(64)
    model = torch.nn.Linear(8, 8)
    trace = CopyTrace([x, *model.parameters()])
    out = x.clone()
    trace.after(kernel("copy_kernel"), (x, out), {})  # an identity task: the degenerate-task warning's job
    assert trace.pytorch_copies(out) == {}
    w = model.weight.detach().reshape(-1).clone()
    trace.after(kernel("copy_kernel"), (model.weight, w), {})
    assert trace.pytorch_copies(w) == {}

    trace = trace_for(x)
    acc, out = torch.zeros(64), torch.zeros(64)  # two zero-filled buffers are equal by chance, not a copy
    trace.after(kernel("reduce_kernel"), (acc, out), {})
    assert trace.pytorch_copies(out) == {}


def test_an_output_written_after_the_copy_by_a_real_kernel_is_not_flagged() -> None:
    x = torch.randn(64)
    trace = trace_for(x)
    y = x * 2
    out = y.clone()
    trace.after(kernel("copy_kernel"), (y, out), {})
    out.add_(1)  # the kernel's real work, in place on the copy
    trace.after(kernel("add_one_inplace"), (out,), {})
    assert trace.pytorch_copies(out) == {}


def op(trace: CopyTrace, fn: object, args: tuple, kwargs: dict | None = None) -> object:
    """Run an ATen operator as the replay does, and tell the trace."""
    got = fn(*args, **(kwargs or {}))
    trace.pytorch_op(fn, args, kwargs or {}, got)
    return got


def test_a_copy_is_found_after_in_place_no_ops_clones_and_real_arithmetic_in_pytorch() -> None:
    """Red team, round eight: `add_(0.0)` in place of the moved result made it PyTorch's, and the comparison with
    what was moved overlapped itself; arithmetic after the copy was never traced back to it."""
    aten = torch.ops.aten
    for after_copy in (lambda t, y: op(t, aten.add_.Tensor, (y, torch.tensor(0.0))),
                       lambda t, y: op(t, aten.mul_.Scalar, (y, 1.0)),
                       lambda t, y: op(t, aten.clone.default, (y,)),
                       lambda t, y: op(t, aten.add.Scalar, (y, 1.0))):
        x = torch.randn(64)
        trace = trace_for(x)
        y = op(trace, aten.mul.Scalar, (x, 2.0))
        out = torch.empty_like(y)
        out.copy_(y)
        trace.after(kernel("copy_kernel"), (y, out), {}, written={storage_key(out)})
        final = after_copy(trace, out)
        assert trace.pytorch_copies(final) == {0: "copy_kernel"}


def test_a_kernel_writing_a_pytorch_value_is_found_whatever_its_arguments() -> None:
    """Red team, round eight: a copy between two ranges of one argument had no other argument to be compared with,
    and 65 junk launches filled the list of PyTorch results the output was compared with."""
    aten = torch.ops.aten
    x = torch.randn(64)
    trace = trace_for(x)
    for i in range(80):  # junk launches, each given a new PyTorch result
        junk = op(trace, aten.add.Scalar, (x, float(i)))
        trace.after(kernel("junk_kernel"), (junk, torch.empty(1)), {}, written=set())
    buf = op(trace, aten.empty.memory_format, ([128],))
    y = op(trace, aten.mul.Scalar, (x, 2.0))
    op(trace, aten.copy_.default, (buf[:64], y))
    buf[64:].copy_(buf[:64])  # the kernel's self-copy, one argument
    trace.after(kernel("selfcopy_kernel"), (buf, 64), {}, written={storage_key(buf)})
    assert trace.pytorch_copies(buf[64:]) == {0: "selfcopy_kernel"}


def test_pytorch_work_on_kernel_results_and_side_outputs_pytorch_made_are_not_flagged() -> None:
    aten = torch.ops.aten
    x = torch.randn(64)
    trace = trace_for(x)
    stats = torch.empty(2)
    stats.copy_(torch.stack([x.mean(), x.std()]))  # a kernel's reduction
    trace.after(kernel("stats_kernel"), (x, stats), {}, written={storage_key(stats)})
    centred = op(trace, aten.sub.Tensor, (x, stats[0]))  # PyTorch finishes the work on the kernel's result
    side = op(trace, aten.mul.Scalar, (x, 3.0))  # a second output PyTorch computed: the call's work check decides
    assert trace.pytorch_copies((centred, side)) == {}
    scalar = op(trace, aten.sum.default, (x,))
    moved = torch.empty(1)
    moved.copy_(scalar.reshape(1))
    trace.after(kernel("copy_kernel"), (scalar, moved), {}, written={storage_key(moved)})
    assert trace.pytorch_copies(moved) == {0: "copy_kernel"}  # one element, moved: still a copy


def test_pytorch_results_laid_end_to_end_are_a_copy_and_inputs_laid_end_to_end_are_not() -> None:
    """Red team, round eight: a kernel that only concatenated two halves PyTorch computed passed."""
    aten = torch.ops.aten
    x = torch.randn(64)
    trace = trace_for(x)
    halves = [op(trace, aten.mul.Scalar, (x[:32], 2.0)), op(trace, aten.mul.Scalar, (x[32:], 2.0))]
    out = torch.empty(64)
    out.copy_(torch.cat(halves))  # what the concatenating kernel wrote
    trace.after(kernel("cat_kernel"), (*halves, out), {}, written={storage_key(out)})
    assert trace.pytorch_copies(out) == {0: "cat_kernel"}

    a, b = torch.randn(32), torch.randn(32)  # a concatenation task: the kernel moves the inputs, its work
    trace = CopyTrace([a, b])
    out = torch.empty(64)
    out.copy_(torch.cat([a, b]))
    trace.after(kernel("cat_kernel"), (a, b, out), {}, written={storage_key(out)})
    assert trace.pytorch_copies(out) == {}


def test_a_changed_span_is_widened_to_whole_elements() -> None:
    """A kernel writing 0.0 over the NaN the replay fills `torch.empty` with changes only the float's two high
    bytes: judged on those alone, the constant was not seen (a one-element gate counted as the kernels' work)."""
    aten = torch.ops.aten
    x = torch.randn(64)
    trace = trace_for(x)
    flag = torch.zeros(1)
    trace.pytorch_op(aten.empty.memory_format, ([1],), {}, flag)
    trace.after(kernel("zero_kernel"), ((flag,),), {}, written={storage_key(flag): (2, 4)})
    gated = op(trace, aten.add.Tensor, (op(trace, aten.mul.Tensor, (x, 2.0)), flag))
    assert trace.pytorch_copies(gated) == {}  # PyTorch's own result: the substitution check's to judge
    assert trace._origin(gated).kind == "pytorch"
