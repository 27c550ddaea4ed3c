"""The fidelity corpus under the CPU interpreter: legitimate patterns pass with the line-up and tolerance
the conventions call for; convention breakers fail the way they should. Cases live in corpus.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from adaexplore_mcp.app import App
from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Evaluation, Verdict
from adaexplore_mcp.tasks.format import TaskSpec
from tests.fidelity import corpus
from tests.fidelity.corpus import Case
from tests.test_judge_cases import cpu_settings


def _task(case: Case) -> TaskSpec:
    return TaskSpec(task_id=f"fid-{case.id}", name=case.id, source=case.task, small_shapes=dict(case.small_shapes))


def _explain(ev: Evaluation) -> str:
    """Everything needed to report a wrong verdict without re-running it."""
    return (f"verdict={ev.verdict.value} lineup={ev.lineup} mismatch={ev.mismatch} "
            f"mismatch_copied={ev.mismatch_copied} rejected={ev.rejected} error={ev.error} "
            f"tolerance={ev.tolerance} precision={ev.precision} warnings={ev.warnings}")


def _params(cases: list[Case]) -> list:
    return [pytest.param(c, id=c.id, marks=[pytest.mark.xfail(strict=True, reason=f"JUDGE: {c.judge_bug}")]
                         if c.judge_bug else []) for c in cases]


def _check(ev: Evaluation, case: Case) -> None:
    why = _explain(ev)
    if "verdict_any" in case.checks:
        assert ev.verdict in (Verdict.passed, Verdict.mismatch), why
    else:
        assert ev.verdict == Verdict(case.verdict), why
    assert ev.tolerance.get("dtype") == case.tolerance_dtype, why
    assert ev.precision.task_dtype == case.tolerance_dtype, why
    assert ev.precision.below_fp32 == case.below_precision, why
    if ev.verdict == Verdict.passed:
        assert ev.kernels_launched, why
        assert ev.rejected is None and ev.mismatch is None and ev.mismatch_copied is None, why
        if case.lineup is not None:
            assert ev.lineup == case.lineup, why
        if ev.lineup == "copied_by_name":
            assert any("copied in by name" in w for w in ev.warnings), why
    if ev.verdict == Verdict.mismatch:
        assert ev.mismatch is not None and ev.lineup is None, why
        if "mismatch_copied" in case.checks:
            assert ev.mismatch_copied is not None, why
    if "skipped_warning" in case.checks:
        assert any("not copied into ModelNew" in w for w in ev.warnings), why


@pytest.mark.parametrize("case", _params(corpus.LEGITIMATE))
def test_legitimate_pattern_passes(judge: Judge, case: Case) -> None:
    _check(judge.evaluate(_task(case), case.candidate), case)


@pytest.mark.parametrize("case", _params(corpus.BREAKERS))
def test_convention_breaker_is_caught(judge: Judge, case: Case) -> None:
    _check(judge.evaluate(_task(case), case.candidate), case)


def test_bf16_task_tolerance_is_the_bf16_one_and_its_own_dtype_is_not_flagged(judge: Judge) -> None:
    case = next(c for c in corpus.LEGITIMATE if c.id == "bf16_task_fp32_compute_bf16_store")
    ev = judge.evaluate(_task(case), case.candidate)
    assert ev.verdict == Verdict.passed, _explain(ev)
    assert ev.tolerance["atol"] == ev.tolerance["rtol"] == 1e-1 and ev.tolerance["dtype"] == "bfloat16"
    assert not ev.precision.below_fp32 and ev.precision.reasons == []


def test_fp16_compute_in_an_fp32_task_is_flagged_with_its_line(judge: Judge) -> None:
    case = next(c for c in corpus.BREAKERS if c.id == "fp32_task_computed_in_fp16")
    ev = judge.evaluate(_task(case), case.candidate)
    assert ev.precision.below_fp32 and any("tl.float16" in r for r in ev.precision.reasons), _explain(ev)
    assert ev.tolerance["atol"] == 1e-2 and ev.tolerance["dtype"] == "float32"


# -- size constants: chained (`height = width = 16`) and tuple (`a, b = 4, 8`), through create_task ----------

@pytest.fixture(scope="module")
def app(judge: Judge, tmp_path_factory: pytest.TempPathFactory):
    app = App(cpu_settings(tmp_path_factory.mktemp("fidelity-app")), judge=judge)
    yield app
    app.store.close()  # the judge is the module's; its fixture closes it


@pytest.mark.parametrize(("small", "x_shape", "y_shape"), [
    pytest.param(corpus.CHAINED_SMALL, (2, 3, 8, 4), (2, 4), id="small_shapes"),
    pytest.param(None, (2, 3, 16, 16), (4, 8), id="full_size"),
])
def test_chained_and_tuple_size_constants_create_and_evaluate(app: App, small, x_shape, y_shape) -> None:
    info, _ = app.create_task(f"chained_{'small' if small else 'full'}", corpus.CHAINED_TASK, small_shapes=small)
    assert [s.shape for s in info.inputs] == [[2, 3, 16, 16], [4, 8]]  # full-size shapes either way
    assert info.small_shapes == (small or {}) and not info.degenerate
    on_gpu = app.judge.backend == "cuda"  # small_shapes are for the CPU interpreter: a GPU evaluates full size
    if on_gpu:
        x_shape, y_shape = (2, 3, 16, 16), (4, 8)
    ev = app.evaluate_kernel(info.task_id, corpus.chained_candidate(x_shape, y_shape))
    # The candidate asserts the shapes it expects: every trial passes, so the task's shapes reached it; the second
    # shape set (judge/checks/second_shapes.py) then moves them, which a candidate with fixed shapes does not survive.
    assert ev.verdict == Verdict.runtime_error and "at the second shape set" in ev.error.message, _explain(ev)
    assert ev.shapes == ("small" if small and not on_gpu else "full") and ev.lineup == "same_seed"
    assert sorted(ev.kernels_launched) == ["ew_kernel"]


# -- a reference that is not deterministic ----------------------------------------------------------------

def test_dropout_in_training_mode_probes_as_not_deterministic(judge: Judge) -> None:
    probe = judge.probe_task(TaskSpec(task_id="fid-dropout", name="dropout", source=corpus.DROPOUT_TASK))
    assert probe.ok, probe
    assert probe.deterministic is False, probe
    assert any("not deterministic" in w for w in probe.warnings), probe.warnings


def test_the_same_task_without_dropout_probes_as_deterministic(judge: Judge) -> None:
    source = corpus.DROPOUT_TASK.replace("return [0.5]", "return [0.0]")
    probe = judge.probe_task(TaskSpec(task_id="fid-nodropout", name="nodropout", source=source))
    assert probe.ok and probe.deterministic is True and not any("deterministic" in w for w in probe.warnings), probe


def test_a_non_deterministic_task_says_so_when_created(app: App) -> None:
    info, _ = app.create_task("dropout_training", corpus.DROPOUT_TASK)
    assert any("not deterministic" in w for w in info.warnings), info.warnings


def test_a_result_on_a_non_deterministic_task_states_the_comparison_policy(app: App) -> None:
    info, _ = app.create_task("dropout_training", corpus.DROPOUT_TASK)
    ev = app.evaluate_kernel(info.task_id, corpus.DROPOUT_CANDIDATE)
    assert ev.kernels_launched == ["ew_kernel"], _explain(ev)  # the candidate itself ran fine
    assert ev.determinism, _explain(ev)
