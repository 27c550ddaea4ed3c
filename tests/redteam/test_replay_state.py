"""Red team, round seventeen: a forged program that tells the replay's runs apart.

The replay's verdict compares runs of one program (as recorded: must compute the result; with the kernels'
writes substituted or skipped: must not). A program that keeps state from one run to the next can be right in
the one and wrong in the other, whatever its kernels do. Three channels did:

- a file: `aten::from_file` mapped a counter that each run incremented (and could write any file, the replay's
  Triton cache included): operators that reach outside their tensors are refused (`replay_kernels.REFUSED_OPS`);
- the lent inputs, shared by the runs: `unsqueeze_` on an input slot changed its shape for the next run, `neg_`
  its values: each run now binds aliases of its own, and the values are checked unchanged between runs
  (`replay_inputs.LentInputs`);
- memory a run left behind: `resize_` exposes unwritten memory like `torch.empty` does: it is filled too.

Also here: compile-time `str.format` (its fields walk attributes and items, underscores included) is refused by
the compile guard (tests/redteam/test_replay_code_execution.py lists it with the other escapes).
"""

from __future__ import annotations

import pytest
import torch

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.judge.replay.run import Run
from adaexplore_mcp.judge.replay.inputs import LentInputs
from adaexplore_mcp.judge.replay.kernels import ReplayError, _op
from adaexplore_mcp.models import Verdict
from tests.redteam.conftest import forging, judged, summary
from tests.test_judge_cases import HEADER

S = 100


def program(steps: list[dict], output: int) -> dict:
    return {"inputs": [0], "constants": [], "kernels": {}, "steps": steps, "output": {"t": output}}


def test_operators_that_reach_outside_their_tensors_are_refused() -> None:
    for name in ("aten::from_file", "aten::from_file.out", "aten::_print"):
        with pytest.raises(ReplayError, match="outside its tensors"):
            _op(name)


# The helper's program: `mean(x)` where the input was unsqueezed once before (the checked run), `x` where twice
# (the full run); the output `x * 2 + 1 + 1000 * (that - x)` is right only in the second run.
SHAPE_STATE = program([
    {"op": "aten::unsqueeze_", "args": {"l": [{"t": 0}, 0]}, "out": {"t": S}},
    {"op": "aten::reshape", "args": {"l": [{"t": 0}, [-1]]}, "out": {"t": S + 1}},
    {"op": "aten::squeeze.dim", "args": {"l": [{"t": 0}, 0]}, "out": {"t": S + 2}},
    {"op": "aten::mean.dim", "args": {"l": [{"t": S + 2}, [0]]}, "out": {"t": S + 3}},
    {"op": "aten::sub.Tensor", "args": {"l": [{"t": S + 3}, {"t": S + 1}]}, "out": {"t": S + 4}},
    {"op": "aten::mul.Tensor", "args": {"l": [{"t": S + 1}, 2.0]}, "out": {"t": S + 5}},
    {"op": "aten::add.Tensor", "args": {"l": [{"t": S + 5}, 1.0]}, "out": {"t": S + 6}},
    {"op": "aten::add.Tensor", "args": {"l": [{"t": S + 6}, {"t": S + 4}]}, "kwargs": {"alpha": 1000.0},
     "out": {"t": S + 7}},
], S + 7)


def test_a_change_of_an_inputs_shape_stays_in_its_run() -> None:
    x = torch.randn(512)
    lent = LentInputs([x])
    runs = [Run(SHAPE_STATE, {}, "cpu", mode).execute(lent.fresh([x]), []) for mode in ("skip", "full")]
    lent.check()
    assert x.shape == (512,)
    assert torch.equal(runs[0], runs[1])  # the two runs cannot be told apart: both wrong


def test_a_change_of_an_inputs_values_is_refused_before_the_next_run() -> None:
    negate = program([{"op": "aten::neg_", "args": {"l": [{"t": 0}]}, "out": {"t": S}},
                      {"op": "aten::mul.Tensor", "args": {"l": [{"t": 0}, 2.0]}, "out": {"t": S + 1}}], S + 1)
    x = torch.randn(64)
    lent = LentInputs([x])
    Run(negate, {}, "cpu", "skip").execute(lent.fresh([x]), [])
    with pytest.raises(ReplayError, match="changed memory it was lent"):
        lent.fresh([x])


def test_memory_a_resize_exposes_is_filled_like_torch_empty() -> None:
    grow = program([{"op": "aten::empty.memory_format", "args": {"l": [[4]]}, "out": {"t": S}},
                    {"op": "aten::fill_.Scalar", "args": {"l": [{"t": S}, 1.0]}, "out": {"t": S + 1}},
                    {"op": "aten::resize_", "args": {"l": [{"t": S}, [4096]]}, "out": {"t": S + 2}}], S + 2)
    got = Run(grow, {}, "cpu", "full").execute([torch.randn(4)], [])
    assert got.shape == (4096,) and torch.equal(got[:4], torch.ones(4)) and torch.isnan(got[4:]).all()


FILE_COUNTER = HEADER + '''

@triton.jit
def zero_kernel(o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(o_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < n)


''' + forging('''        import os
        S = 10 ** 6
        p["steps"] = list(p["steps"]) + [
            {"op": "aten::from_file", "args": {"l": ["/tmp/counter_" + os.urandom(6).hex(), True, 1]},
             "kwargs": {"dtype": {"dtype": "int64"}}, "out": {"t": S}},
            {"op": "aten::add_.Scalar", "args": {"l": [{"t": S}, 1]}, "out": {"t": S + 1}},
            {"op": "aten::eq.Scalar", "args": {"l": [{"t": S}, 2]}, "out": {"t": S + 2}},
            {"op": "aten::add.Tensor", "args": {"l": [p["output"], {"t": S + 2}]}, "out": {"t": S + 3}},
        ]
        p["output"] = {"t": S + 3}''') + '''


class ModelNew(torch.nn.Module):
    def forward(self, x):
        _forge()
        buf = torch.empty(16)
        zero_kernel[(1,)](buf, 16, BLOCK=16)
        return x * 2 + 1
'''


def test_a_file_counter_no_longer_passes_a_pytorch_only_candidate(judge: Judge) -> None:
    ev = judged(judge, FILE_COUNTER)
    assert ev.verdict == Verdict.rejected and ev.rejected is not None, summary(ev)
    assert ev.rejected.check == "work_not_replayable" and "outside its tensors" in ev.rejected.message, summary(ev)


def test_memory_no_operator_wrote_is_filled_whoever_allocates_it(tmp_path) -> None:
    """Round 18: `prims::empty_strided` (not torch.empty) handed a run what the run before it left in freed
    memory, a counter that told the substituted run apart. The replay's process fills all such memory (PyTorch's
    deterministic mode), and refuses `set_`, which grew a storage into such memory unfilled."""
    from pathlib import Path

    from adaexplore_mcp.judge.replay.run import ReplayOps

    class Replayer(ReplayOps):
        def __init__(self) -> None:
            self.device, self.tmp, self.kept = "cpu", Path(tmp_path), {}

    saved = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    saved_fill = torch.utils.deterministic.fill_uninitialized_memory
    try:
        prepared = Replayer().op_replay_prepare({"source": "", "module": "m", "program": {"kernels": {}}}, [], [])
        assert prepared == {"ok": True}
        leave = program([{"op": "prims::empty_strided", "args": {"l": [[1024], [1]]},
                          "kwargs": {"dtype": {"dtype": "float32"}, "device": {"device": "cpu"}, "requires_grad": False}, "out": {"t": S}},
                         {"op": "aten::fill_.Scalar", "args": {"l": [{"t": S}, 7.0]}, "out": {"t": S + 1}}], S + 1)
        take = program([{"op": "prims::empty_strided", "args": {"l": [[1024], [1]]},
                         "kwargs": {"dtype": {"dtype": "float32"}, "device": {"device": "cpu"}, "requires_grad": False}, "out": {"t": S}}], S)
        for _ in range(3):
            Run(leave, {}, "cpu", "full").execute([torch.randn(4)], [])  # its buffer freed with the run
            assert torch.isnan(Run(take, {}, "cpu", "full").execute([torch.randn(4)], [])).all()
        with pytest.raises(ReplayError, match="outside its tensors"):
            _op("aten::set_.source_Tensor_storage_offset")
    finally:
        torch.use_deterministic_algorithms(saved[0], warn_only=saved[1])
        torch.utils.deterministic.fill_uninitialized_memory = saved_fill


def test_a_quantized_or_sparse_tensor_is_refused_before_anything_reads_it() -> None:
    """Round 19: a quantized factory's memory is not filled (a counter of runs lived in it, read through an
    alias as bytes), and reading its bytes crashed the replay. The replay runs dense tensors only."""
    from adaexplore_mcp.judge.replay.flow import WorkFlow

    quantized = program([{"op": "aten::_empty_affine_quantized", "args": {"l": [[1024]]},
                          "kwargs": {"dtype": {"dtype": "quint8"}, "scale": 1.0, "zero_point": 0},
                          "out": {"t": S}}], S)
    sparse = program([{"op": "aten::to_sparse", "args": {"l": [{"t": 0}]}, "out": {"t": S}}], S)
    for prog in (quantized, sparse):
        x = torch.randn(4)
        with pytest.raises(ReplayError, match="dense tensors only"):
            Run(prog, {}, "cpu", "capture", flow=WorkFlow([x], [])).execute([x], [])


FORGED_HONEST = HEADER + '''

@triton.jit
def affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2 + 1, mask=offs < n)


@triton.jit
def noop_kernel(x_ptr):
    pass


def _forge():
    from adaexplore_mcp.judge.replay import record as work_trace
    if getattr(work_trace, "_forged", False):
        return
    work_trace._forged = True

    def program(self):
        x = self.inputs[0]
        self._kernel(affine_kernel, "affine_kernel")
        return {"inputs": self.inputs, "constants": [], "kernels": {"affine_kernel": self.kernels["affine_kernel"]},
                "steps": [{"op": "aten::empty_like", "args": {"l": [{"t": x}]}, "kwargs": {}, "out": {"t": 90001}},
                          {"launch": "affine_kernel", "args": {"l": [{"t": x}, {"t": 90001}, 512]},
                           "kwargs": {"BLOCK": 128}, "grid": [4]}],
                "output": {"t": 90001}}
    work_trace.WorkTrace.program = program


class ModelNew(torch.nn.Module):
    def forward(self, x):
        _forge()
        noop_kernel[(1,)](x)
        return x * 2 + 1
'''


def test_a_forged_program_of_kernels_no_trial_launched_is_not_the_calls_record(judge: Judge) -> None:
    """Round 20: every call did the work in PyTorch beside a no-op launch, and reported a program with one launch of
    an honest kernel that no call ever ran; the replay credited that kernel. The program's kernels must be among
    those the trials launched (a forger must now run them too: what the timed calls run is judged by their time)."""
    ev = judged(judge, FORGED_HONEST)
    assert ev.verdict == Verdict.rejected and ev.rejected is not None, summary(ev)
    assert ev.rejected.check == "work_not_replayable" and "no trial" in ev.rejected.message, summary(ev)
