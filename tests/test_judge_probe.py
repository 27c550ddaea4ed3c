"""Probing a task: a good reference reports its shapes; degenerate ones are flagged; broken ones say why."""

from __future__ import annotations

import pytest

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Verdict
from tests.test_judge_cases import AFFINE_TASK, HEADER, LINEAR_SMALL, LINEAR_TASK, task


@pytest.fixture(scope="module")
def judge(shared_judge: Judge) -> Judge:
    return shared_judge  # tests/conftest.py: one judge for the modules that only evaluate


def _variant(forward: str, inputs: str = "torch.randn(N)") -> str:
    return AFFINE_TASK.replace("return x * 2 + 1", forward).replace("torch.randn(N)", inputs)


def test_a_good_task_probes_ok_with_its_shapes_and_is_not_degenerate(judge: Judge) -> None:
    probe = judge.probe_task(task())
    assert probe.ok and not probe.degenerate, probe
    assert [s.shape for s in probe.inputs] == [[512]] and probe.outputs[0].dtype == "float32"


def test_small_shapes_run_small_but_report_full_size_shapes(judge: Judge) -> None:
    probe = judge.probe_task(task(LINEAR_TASK, LINEAR_SMALL, name="linear"))
    assert probe.ok, probe
    assert [s.shape for s in probe.inputs] == [[2048, 2048]]
    assert [s.shape for s in probe.outputs] == [[2048, 2048]]
    assert any("meta device" in w for w in probe.warnings)


@pytest.mark.parametrize(
    ("forward", "inputs", "why"),
    [
        ("return x * 0", "torch.randn(N)", "all-zeros"),
        ("return torch.relu(x)", "torch.randn(N) - 100", "all-zeros"),
        ("return x.mean(dim=1)", "torch.randn(N, 65536) + 3", "constant"),
        ("return torch.ones_like(x) * 5", "torch.randn(N)", "constant"),
    ],
)
def test_degenerate_references_are_flagged_with_a_reason(judge: Judge, forward: str, inputs: str, why: str) -> None:
    probe = judge.probe_task(task(_variant(forward, inputs), name="degenerate"))
    assert probe.ok and probe.degenerate, probe
    assert any(why in r for r in probe.degenerate_reasons), probe.degenerate_reasons


def test_an_output_that_ignores_the_inputs_is_flagged(judge: Judge) -> None:
    src = _variant("return x * 0 + self.w", "torch.randn(N)").replace(
        "class Model(nn.Module):\n", "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.w = nn.Parameter(torch.randn(N) * 10)\n\n")
    probe = judge.probe_task(task(src, name="ignores"))
    assert probe.degenerate and any("does not change" in r for r in probe.degenerate_reasons), probe


def test_a_reference_that_raises_is_reported_with_its_line(judge: Judge) -> None:
    probe = judge.probe_task(task(_variant("return x @ x.new_ones(3, 3)"), name="raises"))
    assert not probe.ok and "forward raised RuntimeError" in probe.error
    assert "return x @ x.new_ones(3, 3)" in probe.error


def test_a_reference_without_get_inputs_is_reported(judge: Judge) -> None:
    probe = judge.probe_task(task(AFFINE_TASK.replace("def get_inputs", "def make_inputs"), name="noinputs"))
    assert not probe.ok and "get_inputs" in probe.error


def test_probing_after_a_broken_reference_still_works(judge: Judge) -> None:
    assert judge.probe_task(task()).ok


# -- outputs that are not floating point -------------------------------------------------------------
# Found by the red team: with no floating output the NaN check sampled an empty list, and the IndexError
# was reported as "the reference's process answered malformed data" (the task blamed for the judge's bug).

ARGMAX = "return torch.argmax(x.view(16, 32), dim=1)"


@pytest.mark.parametrize(("forward", "dtype"), [(ARGMAX, "int64"), ("return x > 0", "bool"),
                                                ("return torch.complex(x, x)", "complex64")])
def test_a_reference_with_only_integer_bool_or_complex_outputs_probes_ok(judge: Judge, forward: str,
                                                                          dtype: str) -> None:
    probe = judge.probe_task(task(_variant(forward), name=f"out_{dtype}"))
    assert probe.ok and not probe.degenerate and probe.deterministic, probe
    assert [o.dtype for o in probe.outputs] == [dtype], probe.outputs


@pytest.mark.parametrize(("forward", "why"), [
    ("return torch.zeros(16, dtype=torch.long) + (x[0] > 100).long()", "every element 0"),
    ("return torch.arange(16) * 0 + 3", "every element 3"),
    ("return torch.arange(16) + x.new_zeros(16).long()", "does not change"),
])
def test_integer_outputs_are_checked_for_degeneracy_exactly(judge: Judge, forward: str, why: str) -> None:
    probe = judge.probe_task(task(_variant(forward), name="int_degenerate"))
    assert probe.ok and probe.degenerate and any(why in r for r in probe.degenerate_reasons), probe


@pytest.mark.parametrize("dtype", ["uint64", "float8_e4m3fn"])
def test_an_output_dtype_the_judge_cannot_carry_is_named(judge: Judge, dtype: str) -> None:
    probe = judge.probe_task(task(_variant(f"return (x * 2 + 1).to(torch.{dtype})"), name=f"out_{dtype}"))
    assert not probe.ok and "unsupported output dtype" in probe.error and dtype in probe.error, probe.error
    assert "malformed" not in probe.error


def test_a_bug_in_the_probe_is_the_judges_not_the_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Anything but the reference's answer failing to decode is said to be the judge's own failure."""
    from adaexplore_mcp.judge import probe as probe_module

    class Ref:
        def reference(self, task, deadline):
            return object()

        def call_ref(self, ref, header, deadline, what):
            return {"sets": [{"inputs": {"list": []}, "output": {"list": []}}] * probe_module.SEEDS,
                    "outputs": [{"list": []}] * probe_module.SEEDS}, []

        def forget(self, task) -> None:
            self.forgotten = True

    def broken(*args, **kwargs):
        raise IndexError("list index out of range")

    monkeypatch.setattr(probe_module, "_max_diff", broken)
    referee = Ref()
    reply = probe_module.probe(referee, {"limits": {}, "timeout_s": 10, "task": {"shapes": {}}}).fields  # type: ignore[arg-type]
    assert not reply["ok"] and "a bug in the judge" in reply["error"] and "IndexError" in reply["error"], reply
    assert "malformed" not in reply["error"] and "probe.py" in reply["error"] and referee.forgotten


ARGMAX_CANDIDATE = HEADER + '''
@triton.jit
def argmax_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=-float("inf"))
    tl.store(y_ptr + row, tl.argmax(x, axis=0).to(tl.int64) + SHIFT)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.view(16, 32)
        y = torch.empty(16, dtype=torch.int64, device=x.device)
        argmax_kernel[(16,)](x, y, 32, BLOCK=32)
        return y
'''

POSITIVE_CANDIDATE = HEADER + '''
@triton.jit
def positive_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) > THRESHOLD, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty(x.shape, dtype=torch.bool, device=x.device)
        positive_kernel[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), BLOCK=128)
        return y
'''


@pytest.mark.parametrize(("forward", "source", "expected"), [
    (ARGMAX, ARGMAX_CANDIDATE.replace("SHIFT", "0"), Verdict.passed),
    (ARGMAX, ARGMAX_CANDIDATE.replace("SHIFT", "1"), Verdict.mismatch),
    ("return x > 0", POSITIVE_CANDIDATE.replace("THRESHOLD", "0"), Verdict.passed),
    ("return x > 0", POSITIVE_CANDIDATE.replace("THRESHOLD", "0.5"), Verdict.mismatch),
], ids=["argmax", "argmax_off_by_one", "mask", "mask_wrong_threshold"])
def test_a_task_with_integer_or_bool_outputs_judges_candidates(judge: Judge, forward: str, source: str,
                                                               expected: Verdict) -> None:
    spec = task(_variant(forward), name="int_out")
    assert judge.probe_task(spec).ok
    ev = judge.evaluate(spec, source)
    assert ev.verdict == expected, ev.model_dump(exclude_none=True)
