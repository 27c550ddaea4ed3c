"""The whole App on a FakeJudge (no worker processes): create a task, search, expand, export; one stored
evaluation per kernel, linked from its node; degenerate tasks warned once; built-ins probed on first use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adaexplore_mcp.app import App
from adaexplore_mcp.config import Settings
from adaexplore_mcp.models import TaskProbe, TensorSpec
from adaexplore_mcp.search.fake_judge import FakeJudge
from tests.tiny import SCALE_TASK

PASS = "import triton\nclass ModelNew:\n    pass\nBLOCK = 128\n# fake: verdict=passed speedup=none\n"
BROKEN = "import triton\nclass ModelNew:\n    pass\n# fake: verdict=compile_error\n"
PROBED = TaskProbe(ok=True, inputs=[TensorSpec(shape=[4, 32], dtype="float32")],
                   outputs=[TensorSpec(shape=[4, 32], dtype="float32")])


def make_app(home: Path, judge: FakeJudge) -> App:
    return App(Settings(home=home, device="cpu"), judge=judge)


@pytest.fixture
def judge() -> FakeJudge:
    return FakeJudge(probe=PROBED)


@pytest.fixture
def app(tmp_path: Path, judge: FakeJudge):
    app = make_app(tmp_path / "home", judge)
    yield app
    app.close()


def test_create_search_expand_and_export_run_end_to_end_on_the_fake(app: App, judge: FakeJudge) -> None:
    info, created = app.create_task("scale", SCALE_TASK, description="x * s + 1")
    assert created and judge.probes == ["scale"] and info.inputs == PROBED.inputs
    search_id = app.search.start_search(info.task_id, budget=2, seed=0)
    brief = app.search.next_step(search_id)
    assert brief.kind == "large" and brief.task.name == "scale" and brief.timing_available is False
    first = app.search.expand_node(search_id, brief.step_id, kernel_source=PASS, note="first")
    assert first.evaluation.verdict == "passed" and first.is_new_best and first.evaluation.eval_id
    second = app.search.expand_node(search_id, app.search.next_step(search_id).step_id, kernel_source=BROKEN)
    assert second.evaluation.verdict == "compile_error" and second.done and not second.is_new_best
    assert judge.calls == [PASS, BROKEN]

    best = app.search.best_kernel(search_id)
    assert best.node_id == first.node_id and best.evaluation == first.evaluation
    exported = app.export_kernel(search_id)
    assert Path(exported.path).read_text() == exported.source
    assert "class ModelNew" in exported.source and "def get_inputs" in exported.source
    report = app.search_report(search_id, png=False)
    assert Path(report.html_path).exists() and report.best_node_id == first.node_id
    assert report.verdicts == {"passed": 1, "compile_error": 1}


def test_every_evaluation_is_stored_once_and_a_node_links_to_it(app: App) -> None:
    info, _ = app.create_task("scale", SCALE_TASK)
    direct = app.evaluate_kernel(info.task_id, BROKEN)
    assert json.loads(app.evaluation_json(direct.eval_id)) == json.loads(direct.model_dump_json())

    search_id = app.search.start_search(info.task_id, budget=2, strategy="iterative_refinement")
    result = app.search.expand_node(search_id, app.search.next_step(search_id).step_id, kernel_source=BROKEN)
    stored = app.store.read("SELECT eval_id, result FROM evaluations ORDER BY created_at")
    assert [r["eval_id"] for r in stored] == [direct.eval_id, result.evaluation.eval_id]
    assert json.loads(stored[1]["result"]) == json.loads(result.evaluation.model_dump_json())
    payload = app.store.read_one("SELECT evaluation, eval_id FROM node_payloads WHERE search_id = ?", (search_id,))
    assert payload["eval_id"] == result.evaluation.eval_id and payload["evaluation"] == ""  # no second copy
    brief = app.search.next_step(search_id)  # a small step on the failed node: its error, read through the link
    assert brief.parent_node_id == result.node_id
    assert brief.parent_evaluation.error == "FakeError: fake compile_error"


def test_a_degenerate_task_says_so_once_on_each_result(tmp_path: Path) -> None:
    degenerate = TaskProbe(ok=True, degenerate=True, degenerate_reasons=["a constant output passes"])
    app = make_app(tmp_path / "home", FakeJudge(probe=degenerate))
    try:
        info, _ = app.create_task("flat", SCALE_TASK)
        assert info.degenerate and "degenerate: a constant output passes" in info.warnings
        for ev in (app.evaluate_kernel(info.task_id, PASS),
                   app.search.expand_node(sid := app.search.start_search(info.task_id, 1),
                                          app.search.next_step(sid).step_id, kernel_source=PASS).evaluation):
            assert ev.degenerate_task is True
            assert sum("degenerate" in w for w in ev.warnings) == 1, ev.warnings
    finally:
        app.close()


def test_a_builtin_is_probed_on_its_first_evaluation_once_and_the_probe_is_stored(
        tmp_path: Path, judge: FakeJudge) -> None:
    home = tmp_path / "home"
    app = make_app(home, judge)
    try:
        assert judge.probes == [] and not app.tasks.is_probed("layernorm")  # startup runs nothing
        assert app.tasks.info("layernorm").inputs == []
        app.evaluate_kernel("layernorm", PASS)
        app.evaluate_kernel("layernorm", PASS)
        assert judge.probes == ["layernorm"] and app.tasks.is_probed("layernorm")
        assert app.tasks.info("layernorm").inputs == PROBED.inputs
    finally:
        app.close()
    again = FakeJudge(probe=PROBED)
    reopened = make_app(home, again)
    try:
        reopened.evaluate_kernel("layernorm", PASS)
        assert again.probes == []  # stored: another server on the data directory does not probe again
    finally:
        reopened.close()


def test_a_builtin_is_probed_when_a_search_starts_and_a_degenerate_one_is_flagged(tmp_path: Path) -> None:
    judge = FakeJudge(probe=TaskProbe(ok=True, degenerate=True, degenerate_reasons=["input-independent"]))
    app = make_app(tmp_path / "home", judge)
    try:
        search_id = app.search.start_search("rmsnorm", budget=1)
        assert judge.probes == ["rmsnorm"]
        brief = app.search.next_step(search_id)
        assert brief.task.degenerate is True and judge.probes == ["rmsnorm"]
        result = app.search.expand_node(search_id, brief.step_id, kernel_source=PASS)
        assert result.evaluation.degenerate_task is True
    finally:
        app.close()


def test_a_failed_builtin_probe_is_not_stored_and_is_tried_again(tmp_path: Path) -> None:
    judge = FakeJudge(probe=TaskProbe(ok=False, error="the reference did not finish within the time limit"))
    app = make_app(tmp_path / "home", judge)
    try:
        assert app.evaluate_kernel("layernorm", PASS).verdict == "passed"  # the evaluation still runs
        assert not app.tasks.is_probed("layernorm")
        judge.probe = PROBED
        app.evaluate_kernel("layernorm", PASS)
        assert judge.probes == ["layernorm", "layernorm"] and app.tasks.is_probed("layernorm")
    finally:
        app.close()
