"""The scripted proposer drives whole searches through the SearchService API (FakeJudge, no GPU)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from adaexplore_mcp.search import STRATEGIES, SearchService
from adaexplore_mcp.search.fake_judge import FakeEvaluator, FakeJudge
from adaexplore_mcp.search.proposer import set_tunables, tunables
from adaexplore_mcp.store import Store
from devtools.scripted_search import run_scripted_search


def fake_service(store: Store, judge: FakeJudge, timing_available: bool = False) -> SearchService:
    """Every task id is a task named by its id (FakeEvaluator's default)."""
    return SearchService(store, FakeEvaluator(store, judge, timing_available=timing_available))


@dataclass(frozen=True)
class Template:
    variant: str
    source: str


FLAT = """\
BLOCK_SIZE = 1024  # tunable: 256, 512, 1024, 2048
NUM_WARPS = 4  # tunable: 2, 4, 8
import triton
class ModelNew:  # variant flat
    pass
"""
TILED = """\
BLOCK_M = 64  # tunable: 32, 64, 128
NUM_WARPS = 4  # tunable: 4, 8
import triton
class ModelNew:  # variant tiled
    pass
"""


def templates(task_name: str) -> list[Template]:
    return [Template("flat", FLAT), Template("tiled", TILED)]


def fake_speed(source: str) -> tuple[str, float | None]:
    """flat is fast with big blocks but BLOCK_SIZE=2048 with 2 warps does not compile; tiled is steady."""
    t = {name: knob.value for name, knob in tunables(source).items()}
    if "BLOCK_SIZE" in t:
        if t["BLOCK_SIZE"] == 2048 and t["NUM_WARPS"] == 2:
            return "compile_error", None
        return "passed", round(t["BLOCK_SIZE"] / 512 * t["NUM_WARPS"] / 4, 3)
    return "passed", round(1.2 + t["BLOCK_M"] / 128, 3)


@pytest.fixture
def svc(tmp_path) -> SearchService:
    return fake_service(Store(tmp_path / "db.sqlite3"), FakeJudge(fake_speed), timing_available=True)


def test_tunable_lines_are_parsed_and_rewritten():
    knobs = tunables(FLAT)
    assert knobs["BLOCK_SIZE"].value == 1024 and knobs["BLOCK_SIZE"].choices == (256, 512, 1024, 2048)
    assert knobs["BLOCK_SIZE"].assign == "BLOCK_SIZE = 1024"
    out = set_tunables(FLAT, {"BLOCK_SIZE": 256})
    assert "BLOCK_SIZE = 256  # tunable: 256, 512, 1024, 2048" in out and "NUM_WARPS = 4" in out


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_scripted_proposer_runs_a_full_search(svc, strategy):
    summary = run_scripted_search(svc, "t1", "t1", 40, seed=1, strategy=strategy, templates=templates)
    assert summary.steps == 40 and sum(summary.verdicts.values()) == 40
    assert summary.best_speedup is not None and summary.best_speedup >= 2.0
    assert len(summary.best_curve) == 41 and summary.best_curve[-1] == summary.best_speedup
    assert svc.next_step(summary.search_id).done


def test_small_steps_are_one_line_edits_and_failed_parents_are_repaired(svc):
    sid = svc.start_search("t1", 60, seed=2)
    from adaexplore_mcp.search.proposer import ScriptedProposer

    proposer = ScriptedProposer(templates("t1"), seed=2)
    repairs = edits = 0
    for _ in range(60):
        brief = svc.next_step(sid)
        answer = proposer.propose(brief)
        if brief.kind == "small":
            if "repair" in answer["note"]:
                repairs += 1
                assert brief.parent_evaluation.verdict != "passed"
            if "edits" in answer:
                edits += 1
                assert all(e["old"] in brief.parent_kernel for e in answer["edits"])
        res = svc.expand_node(sid, brief.step_id, **answer)
        if brief.kind == "small" and "edits" in answer and "repair" not in answer["note"]:
            before = svc.node_kernel(sid, brief.parent_node_id).splitlines()
            after = svc.node_kernel(sid, res.node_id).splitlines()
            assert sum(a != b for a, b in zip(before, after)) == 1
    assert edits > 10


def test_the_same_seed_replays_the_same_scripted_search(tmp_path):
    def once(name: str):
        svc = fake_service(Store(tmp_path / name), FakeJudge(fake_speed), timing_available=True)
        s = run_scripted_search(svc, "t1", "t1", 30, seed=7, templates=templates)
        return [(n.parent_id, n.kind, n.speedup, n.note) for n in svc.get_search(s.search_id).nodes]

    assert once("a.sqlite3") == once("b.sqlite3")


def test_the_shipped_solution_templates_drive_a_search_for_every_builtin_task(tmp_path):
    pytest.importorskip("adaexplore_mcp.tasks.solutions")
    from adaexplore_mcp.tasks.solutions import solution_task_names, solutions

    svc = fake_service(Store(tmp_path / "db.sqlite3"), FakeJudge())
    for name in solution_task_names():
        assert solutions(name)
        summary = run_scripted_search(svc, name, name, 12, seed=0, strategy="adaexplore")
        assert summary.steps == 12 and summary.correct == 12
