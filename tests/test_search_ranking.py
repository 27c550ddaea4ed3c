"""One meaning of "best": the tree, the search's stored best and views, and the exports agree on every
sequence of verdicts (adaexplore_mcp.ranking: passed+timed by speedup, then passed untimed, earliest on ties)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from adaexplore_mcp.app import tree_snapshot
from adaexplore_mcp.ranking import beats, best_of, rank_key, running_best
from adaexplore_mcp.search import SearchService
from adaexplore_mcp.search.fake_judge import FakeEvaluator
from adaexplore_mcp.search.tree import Tree, TreeNode, best_node
from adaexplore_mcp.store import Store

# (verdict, speedup) per step; None = not timed
SEQUENCES = {
    "untimed then slower timed": [("passed", None), ("passed", 0.5), ("mismatch", None)],
    "timed then untimed": [("passed", 0.5), ("passed", None), ("passed", 0.4)],
    "ties keep the earliest": [("compile_error", None), ("passed", 2.0), ("passed", 2.0), ("passed", 1.5)],
    "only untimed": [("passed", None), ("passed", None)],
    "nothing passes": [("mismatch", None), ("crashed", None)],
    "faster later": [("passed", None), ("passed", 1.2), ("passed", 3.0), ("rejected", None)],
}
EXPECTED_BEST = {  # node ids (the first step is node 1)
    "untimed then slower timed": 2,
    "timed then untimed": 1,
    "ties keep the earliest": 2,
    "only untimed": 1,
    "nothing passes": None,
    "faster later": 3,
}


def node(verdict: str | None, speedup: float | None) -> SimpleNamespace:
    return SimpleNamespace(verdict=verdict, speedup=speedup)


def test_the_rule_passed_timed_by_speedup_then_passed_untimed_then_the_earliest():
    assert rank_key(node("passed", 0.5)) > rank_key(node("passed", None))  # a measurement beats none
    assert rank_key(node("passed", None)) > rank_key(node("mismatch", 9.0))
    assert beats(node("passed", 2.0), node("passed", 1.0)) and not beats(node("passed", 2.0), node("passed", 2.0))
    assert beats(node("passed", None), None) and not beats(node("timeout", None), None)
    seq = [node("mismatch", None), node("passed", None), node("passed", 0.7)]
    assert [b and b.speedup for b in running_best(seq)] == [None, None, 0.7]
    assert best_of(seq) is seq[2] and best_of([]) is None


def kernel(verdict: str, speedup: float | None, k: int) -> str:
    return f"class ModelNew: pass  # {k}\n# fake: verdict={verdict} speedup={'none' if speedup is None else speedup}\n"


@pytest.mark.parametrize("name", list(SEQUENCES))
def test_tree_search_views_and_exports_name_the_same_best(tmp_path, name):
    steps, expected = SEQUENCES[name], EXPECTED_BEST[name]
    tree = Tree.new()
    for verdict, speedup in steps:
        tree.add(TreeNode(node_id=len(tree), parent_id=0, kind="large", depth=1, verdict=verdict, speedup=speedup))
    assert tree.best == best_node(tree) == expected

    store = Store(tmp_path / "db.sqlite3")
    svc = SearchService(store, FakeEvaluator(store))
    sid = svc.start_search("t1", len(steps), strategy="parallel_sampling")
    for k, (verdict, speedup) in enumerate(steps):
        svc.expand_node(sid, svc.next_step(sid).step_id, kernel_source=kernel(verdict, speedup, k))
    view = svc.get_search(sid)
    assert view.best_node_id == expected
    snapshot = tree_snapshot(view, "t1")
    assert snapshot.best_node_id == (None if expected is None else str(expected))
    unstated = snapshot.model_copy(update={"best_node_id": None})  # the export's own ranking, from the nodes
    assert (unstated.best().node_id if unstated.best() else None) == (None if expected is None else str(expected))
    if expected is None:
        return
    assert svc.best_kernel(sid).node_id == expected
    best_speedup = steps[expected - 1][1]
    assert view.best_speedup == best_speedup
    assert view.best_curve[-1] == (best_speedup if best_speedup is not None else 1.0)
    assert unstated.best_curve()[-1][1] == best_speedup
