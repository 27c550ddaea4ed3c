"""The work policy (judge/work_policy.py) on the data flow of a replayed run (judge/replay/flow.py), in-process.

A call is recorded (replay/record.py) and replayed with its data flow followed, as the replay's process does; each
case shows one side of the rule: what PyTorch may do around the candidate's kernels, and what is library fallback
or laundering. The judge's own verdicts on such candidates are in tests/test_shortcut_families.py and the red team.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from adaexplore_mcp.judge import work_policy
from adaexplore_mcp.judge.replay.run import Run, build_kernels
from adaexplore_mcp.judge.replay.flow import WorkFlow
from tests.test_work_replay import load, record

KERNELS = textwrap.dedent('''
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def scale_kernel(x_ptr, y_ptr, n, s, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * s + 1, mask=mask)


    @triton.jit
    def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


    def scale(x, s=2.0):
        y = torch.empty_like(x)
        scale_kernel[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), s, BLOCK=128)
        return y


    def copy(x):
        y = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), BLOCK=128)
        return y


    class ModelNew(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(64, 64))

        def forward(self, x):
    {body}
''')


def findings(tmp_path: Path, body: str, capture: bool = True) -> list[work_policy.Finding]:
    """The policy's findings for a ModelNew whose forward is `body` (8 spaces in), on a (64, 64) input: recorded on
    one input, replayed on another with the data flow followed (in a capture run, or a run as recorded)."""
    source = KERNELS.replace("{body}\n", textwrap.indent(body.strip("\n"), "        ") + "\n")
    module = load(tmp_path, source, "cand_policy_test")
    torch.manual_seed(0)
    model = module.ModelNew()
    trace, _ = record(module, model, torch.randn(64, 64))
    assert trace.problem is None, trace.problem
    program = trace.program()
    kernels = build_kernels(source, program["kernels"], "cand_policy_test", tmp_path)
    other, constants = torch.randn(64, 64), [c.clone() for c in trace.constants]
    run = Run(program, kernels, "cpu", "capture" if capture else "full", flow=WorkFlow([other], constants))
    return run.flow.findings(run.execute([other], constants))  # type: ignore[union-attr]


@pytest.mark.parametrize("capture", [True, False], ids=["capture", "as_recorded"])
@pytest.mark.parametrize("body", [
    "return scale(x)",
    "return scale(x.t().contiguous()).t()",  # a layout move of an input, then a view of the kernel's output
    "return scale(x.reshape(-1)).view(64, 64).clone()",
    "return torch.cat([scale(x[:32]), scale(x[32:])])",  # PyTorch lays the kernels' results end to end
    "return scale(x.double()).float()",  # conversions around the kernel
    "return scale(x, self.weight.amax().item())",  # glue: one element read back into a launch argument
    "return scale(x, self.weight.sum(dim=1)[0].item())",  # glue: 64 elements, the bound for 64 x 64
], ids=["kernel", "layout_in", "view_out", "cat_of_kernels", "conversions", "scalar_glue", "glue_at_bound"])
def test_allocation_views_layout_moves_and_small_glue_are_allowed(tmp_path: Path, body: str, capture: bool) -> None:
    assert findings(tmp_path, body, capture) == []


@pytest.mark.parametrize("capture", [True, False], ids=["capture", "as_recorded"])
@pytest.mark.parametrize("body, op", [
    ("copy_kernel[(1,)](x, torch.empty(1), 1, BLOCK=1)\nreturn x * 2 + 1", "aten::mul"),  # a token kernel
    ("return scale(x @ self.weight.t())", "aten::mm"),  # PyTorch's matmul, a kernel's epilogue
    ("return scale(x).relu_()", "aten::relu_"),  # in place on the kernel's result
    ("y = scale(x)\ny[:, :8] = torch.sigmoid(x[:, :8])\nreturn y", "aten::sigmoid"),  # part of the output
    ("return scale(x, x.abs().sum().item())", "aten::abs"),  # through a value read back
    ("return scale(x, self.weight.sum(dim=1).amax().item())", "aten::sum"),  # glue of 65 elements
    ("return copy(x * 2 + 1)", "aten::mul"),  # laundering through a copy kernel is library fallback first
])
def test_a_compute_operator_reaching_an_output_is_library_fallback(tmp_path: Path, body: str, op: str,
                                                                    capture: bool) -> None:
    found = findings(tmp_path, body, capture)
    assert [(f.rule, f.output) for f in found] == [("library_fallback", 0)], found
    assert found[0].op.split(".")[0] == op and found[0].elements > found[0].bound, found
    assert found[0].bound == 64 * 64 // work_policy.GLUE_SHARE


@pytest.mark.parametrize("body, op", [
    ("return copy(x.t().contiguous())", "aten::clone"),  # a transpose task done by PyTorch's move
    ("return copy(x.half()).float()", "aten::_to_copy"),  # a cast done by PyTorch, copied, cast back
    ("y = torch.empty(2, 64, 64)\ny[1].copy_(x.t())\nreturn copy(y[1])", "aten::copy_"),
])
def test_a_kernel_that_only_copies_a_value_pytorch_made_is_laundering(tmp_path: Path, body: str, op: str) -> None:
    found = findings(tmp_path, body)
    assert [(f.rule, f.op) for f in found] == [("exact_copy", op)], found


def test_an_input_copied_is_no_laundering_and_results_reaching_no_output_are_not_followed(tmp_path: Path) -> None:
    assert findings(tmp_path, "return copy(x.contiguous())") == []  # an identity's work: the substitution judges it
    assert findings(tmp_path, "unused = x @ x\nreturn scale(x)") == []
    assert findings(tmp_path, "assert x.abs().sum().item() > 0\nreturn scale(x)") == []  # a read no launch uses


def test_the_table_names_a_family_with_a_reason_for_every_operator() -> None:
    assert set(work_policy.ALLOWED.values()) == set(work_policy.FAMILIES)
    assert all(reason.strip() for reason in work_policy.FAMILIES.values())
    assert work_policy.family("aten::view.default") == "view"
    assert work_policy.family("aten::empty.memory_format") == "allocation"
    assert work_policy.family("aten::copy_.default") == "layout"
    for compute in ("aten::add.Tensor", "aten::mm.default", "aten::index.Tensor", "aten::flip.default"):
        assert work_policy.family(compute) is None
    assert work_policy.fallback(0, 64 * 64, {"aten::sum.dim_IntList": 64}) is None
    assert work_policy.fallback(0, 64 * 64, {"aten::sum.dim_IntList": 64, "aten::mul.Tensor": 1}) is not None
