"""Probing a task: a good reference reports its shapes; degenerate ones are flagged; broken ones say why."""

from __future__ import annotations

import pytest

from adaexplore_mcp.judge import Judge
from tests.test_judge_cases import AFFINE_TASK, LINEAR_SMALL, LINEAR_TASK, cpu_settings, task


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory):
    j = Judge(cpu_settings(tmp_path_factory.mktemp("judge")))
    yield j
    j.close()


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
