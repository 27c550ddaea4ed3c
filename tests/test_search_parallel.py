"""Several steps out at once: virtual loss, leases, duplicates, expand_node(next=true), expand_nodes, and two
processes expanding the handed-out steps of one search."""

from __future__ import annotations

import json
import multiprocessing
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from adaexplore_mcp.app import App
from adaexplore_mcp.config import Settings
from adaexplore_mcp.errors import UserError
from adaexplore_mcp.search import SearchService
from adaexplore_mcp.search.duplicates import normalized, source_key
from adaexplore_mcp.search.fake_judge import FakeEvaluator, FakeJudge, fake_verdict
from adaexplore_mcp.search.tree import Tree, TreeNode, backpropagate, select, with_pending
from adaexplore_mcp.server import build_server
from adaexplore_mcp.store import Store


def service(path: Path, judge: FakeJudge | None = None, **kw: Any) -> SearchService:
    store = Store(path)
    return SearchService(store, FakeEvaluator(store, judge), **kw)


def kernel(tag: str, verdict: str = "passed", speedup: float | None = 1.5) -> str:
    return (f"import triton\nclass ModelNew:\n    tag = {tag!r}\n"
            f"# fake: verdict={verdict} speedup={'none' if speedup is None else speedup}\n")


def status(svc: SearchService, step_id: str) -> str:
    return svc.store.read_one("SELECT status FROM steps WHERE step_id = ?", (step_id,))["status"]


def briefs(first) -> list:
    return [first, *first.more_steps]


# -- several steps out: the window and virtual loss --------------------------------------------------

def test_next_step_hands_out_up_to_count_steps_and_the_same_ones_again(tmp_path: Path) -> None:
    svc = service(tmp_path / "db.sqlite3")
    sid = svc.start_search("t1", 3)
    two = [b.step_id for b in briefs(svc.next_step(sid, count=2))]
    assert len(set(two)) == 2
    assert svc.next_step(sid).step_id == two[0]  # the steps out come first
    assert [b.step_id for b in briefs(svc.next_step(sid, count=2))] == two
    five = briefs(svc.next_step(sid, count=5))
    assert len(five) == 3  # the budget counts steps out: 3 at most
    new, *held = five  # a new brief comes whole and first; the two already handed out come as stubs
    assert not new.already_sent and new.step_id not in two and new.task is not None
    assert [b.step_id for b in held] == two and all(b.already_sent and b.task is None for b in held)
    assert set(svc.get_search(sid).pending_step_ids) == {b.step_id for b in five}
    again = briefs(svc.next_step(sid, count=3, resend=True))
    assert [b.step_id for b in again] == [*two, new.step_id] and not any(b.already_sent for b in again)
    with pytest.raises(UserError, match="count must be an integer from 1 to 8"):
        svc.next_step(sid, count=9)


def test_virtual_loss_spreads_steps_handed_out_together(tmp_path: Path) -> None:
    svc = service(tmp_path / "db.sqlite3")
    sid = svc.start_search("t1", 20, seed=3)
    first = briefs(svc.next_step(sid, count=3))
    assert [b.parent_node_id for b in first] == [0, 0, 0]  # the root is a leaf: every step grows it
    for b in first:  # three root children with equal values
        svc.expand_node(sid, b.step_id, kernel_source=kernel(b.step_id))
    four = briefs(svc.next_step(sid, count=4))
    parents = [b.parent_node_id for b in four]
    assert len(four) == 4 and len(set(parents)) == 3, parents  # not all the node UCT likes best
    assert sorted(set(parents)) == [1, 2, 3]


def test_with_pending_counts_a_step_out_as_a_visit_and_leaves_the_tree_alone() -> None:
    tree = Tree.new()
    for i in (1, 2):
        tree.add(TreeNode(node_id=i, parent_id=0, kind="large", depth=1, verdict="passed", reward=0.5))
        backpropagate(tree, i, 0.5)
    assert select(tree) == 1
    seen = with_pending(tree, [(1, "small"), (1, "small")])
    assert seen.nodes[1].visits == 3 and seen.nodes[0].visits == 4 and seen.pending_small == {1: 2}
    assert select(seen) == 2
    assert tree.nodes[1].visits == 1 and tree.nodes[0].visits == 2 and tree.pending_small == {}
    assert with_pending(tree, []) is tree


def test_a_pending_small_step_counts_as_a_small_child(tmp_path: Path) -> None:
    """No node gets more than max_small_children small children, even from steps handed out together."""
    svc = service(tmp_path / "db.sqlite3")
    sid = svc.start_search("t1", 40, seed=5, p_large=0.0)
    for _ in range(5):
        for b in briefs(svc.next_step(sid, count=8)):
            if b.done:
                break
            svc.expand_node(sid, b.step_id, kernel_source=kernel(b.step_id))
    nodes = svc.get_search(sid).nodes
    for n in nodes:
        assert sum(1 for c in nodes if c.parent_id == n.node_id and c.kind == "small") <= 2


def drive_in_rounds(svc: SearchService, sid: str, rounds: int, count: int) -> None:
    for r in range(rounds):
        out = briefs(svc.next_step(sid, count=count))
        for b in reversed(out):  # expansions in another order than the hand-out
            svc.expand_node(sid, b.step_id, kernel_source=kernel(f"{r}-{b.steps_used}-{b.parent_node_id}-{b.kind}",
                                                                 speedup=1 + (r * 7 + b.parent_node_id) % 5))


def test_the_same_seed_and_the_same_calls_replay_the_same_tree(tmp_path: Path) -> None:
    a, b = service(tmp_path / "a.sqlite3"), service(tmp_path / "b.sqlite3")
    sa, sb = a.start_search("t1", 30, seed=8), b.start_search("t1", 30, seed=8)
    drive_in_rounds(a, sa, 10, 3)
    drive_in_rounds(b, sb, 10, 3)
    shape = [(n.node_id, n.parent_id, n.kind, n.visits) for n in a.get_search(sa).nodes]
    assert shape == [(n.node_id, n.parent_id, n.kind, n.visits) for n in b.get_search(sb).nodes]
    assert len(shape) == 31


def test_count_one_waits_for_a_step_being_evaluated_and_count_two_gives_another(tmp_path: Path) -> None:
    entered, release = threading.Event(), threading.Event()

    def slow(source: str):
        entered.set()
        release.wait(10)
        return fake_verdict(source)

    svc = service(tmp_path / "db.sqlite3", FakeJudge(slow))
    sid = svc.start_search("t1", 5)
    step = svc.next_step(sid).step_id
    worker = threading.Thread(target=svc.expand_node, args=(sid, step), kwargs={"kernel_source": kernel("a")})
    worker.start()
    try:
        assert entered.wait(10)
        with pytest.raises(UserError, match="is being evaluated.*count=2"):
            svc.next_step(sid)
        other = svc.next_step(sid, count=2)
        assert other.step_id != step and other.more_steps == []
    finally:
        release.set()
        worker.join()


# -- leases -------------------------------------------------------------------------------------------

def test_a_step_whose_lease_ran_out_goes_back_and_cannot_be_expanded(tmp_path: Path) -> None:
    svc = service(tmp_path / "db.sqlite3", lease_s=0.2)
    sid = svc.start_search("t1", 2)
    old = [b.step_id for b in briefs(svc.next_step(sid, count=2))]
    time.sleep(0.3)
    assert svc.get_search(sid).pending_step_ids == []  # gone back: no longer out
    fresh = [b.step_id for b in briefs(svc.next_step(sid, count=2))]  # the budget is free again
    assert len(fresh) == 2 and not set(fresh) & set(old)
    with pytest.raises(UserError, match="expired.*Call next_step for a new step"):
        svc.expand_node(sid, old[0], kernel_source=kernel("late"))
    assert status(svc, old[0]) == "expired" and status(svc, old[1]) == "expired"
    svc.expand_node(sid, fresh[0], kernel_source=kernel("x"))
    svc.expand_node(sid, fresh[1], kernel_source=kernel("y"))
    tree = svc.get_search(sid)
    assert tree.steps_used == 2 and len(tree.nodes) == 3 and svc.next_step(sid).done


def test_next_step_renews_the_lease_of_the_steps_it_hands_out_again(tmp_path: Path) -> None:
    svc = service(tmp_path / "db.sqlite3", lease_s=1.0)
    sid = svc.start_search("t1", 2)
    step = svc.next_step(sid).step_id
    time.sleep(0.6)
    assert svc.next_step(sid).step_id == step  # renewed for another second
    time.sleep(0.6)
    assert svc.expand_node(sid, step, kernel_source=kernel("in time")).node_id == 1


def test_an_expired_step_no_longer_counts_as_a_visit(tmp_path: Path) -> None:
    svc = service(tmp_path / "db.sqlite3", lease_s=0.2)
    sid = svc.start_search("t1", 10, seed=1)
    for b in briefs(svc.next_step(sid, count=2)):
        svc.expand_node(sid, b.step_id, kernel_source=kernel(b.step_id))
    plain = svc.next_step(sid).parent_node_id  # what UCT picks with nothing out
    time.sleep(0.3)
    assert svc.next_step(sid).parent_node_id == plain  # the expired step's virtual loss is gone


def test_a_step_handed_out_before_leases_existed_does_not_expire(tmp_path: Path) -> None:
    svc = service(tmp_path / "db.sqlite3", lease_s=0.1)
    sid = svc.start_search("t1", 2)
    step = svc.next_step(sid).step_id
    with svc.store.write() as tx:  # as migration 7 leaves a step handed out by an older server
        tx.execute("UPDATE steps SET lease_until = NULL WHERE step_id = ?", (step,))
    time.sleep(0.2)
    assert svc.get_search(sid).pending_step_ids == [step]
    assert svc.expand_node(sid, step, kernel_source=kernel("old")).node_id == 1


# -- duplicates -------------------------------------------------------------------------------------

def test_normalization_drops_trailing_whitespace_and_blank_lines_only() -> None:
    a = "import triton\n\nclass ModelNew:   \n    pass\n"
    assert normalized(a) == "import triton\nclass ModelNew:\n    pass"
    assert source_key(a) == source_key("import triton\nclass ModelNew:\n\n\n    pass")
    assert source_key(a) != source_key(a.replace("pass", "pass  # x"))


def test_a_repeated_kernel_is_answered_from_the_stored_evaluation(tmp_path: Path) -> None:
    judge = FakeJudge()
    svc = service(tmp_path / "db.sqlite3", judge)
    sid = svc.start_search("t1", 4)
    first = svc.expand_node(sid, svc.next_step(sid).step_id, kernel_source=kernel("k", speedup=2.0))
    assert len(judge.calls) == 1 and first.duplicate_of is None and first.warnings == []
    again = svc.expand_node(sid, svc.next_step(sid).step_id, kernel_source=kernel("k", speedup=2.0) + "\n\n   \n")
    assert len(judge.calls) == 1  # nothing was run
    assert again.duplicate_of == 1 and again.node_id == 2 and "duplicate" in again.warnings[0]
    assert again.evaluation.eval_id == first.evaluation.eval_id and again.evaluation.speedup == 2.0
    assert again.reward == first.reward and again.steps_used == 2  # still a step of the search
    other = svc.expand_node(sid, svc.next_step(sid).step_id, kernel_source=kernel("other"))
    assert len(judge.calls) == 2 and other.duplicate_of is None


# -- one call per step -----------------------------------------------------------------------------

def test_expand_node_with_next_returns_the_next_brief(tmp_path: Path) -> None:
    svc = service(tmp_path / "db.sqlite3")
    sid = svc.start_search("t1", 3)
    result = svc.expand_node(sid, svc.next_step(sid).step_id, kernel_source=kernel("a"), next=True)
    assert result.next_step is not None and not result.next_step.done
    assert result.next_step.step_id == svc.next_step(sid).step_id and result.next_step.steps_used == 1
    plain = svc.expand_node(sid, result.next_step.step_id, kernel_source=kernel("b"))
    assert plain.next_step is None  # only when asked for
    last = svc.expand_node(sid, svc.next_step(sid).step_id, kernel_source=kernel("c"), next=True)
    assert last.done and last.next_step is not None and last.next_step.done


def test_expand_nodes_evaluates_items_concurrently_and_isolates_a_bad_one(tmp_path: Path) -> None:
    barrier = threading.Barrier(2, timeout=10)

    def together(source: str):
        barrier.wait()  # two evaluations must be in the judge at once, or this times out
        return fake_verdict(source)

    judge = FakeJudge(together)
    svc = service(tmp_path / "db.sqlite3", judge)
    sid = svc.start_search("t1", 6)
    a, b, c = (x.step_id for x in briefs(svc.next_step(sid, count=3)))
    batch = svc.expand_nodes(sid, [
        {"step_id": a, "kernel_source": kernel("a"), "note": "first"},
        {"step_id": b, "edits": [{"old": "nowhere", "new": "x"}]},  # a large step takes no edits
        {"step_id": c, "kernel_source": kernel("c", speedup=3.0)},
    ], next=2)
    ok = [r.ok for r in batch.results]
    assert ok == [True, False, True] and [r.step_id for r in batch.results] == [a, b, c]
    assert "large step" in batch.results[1].error and batch.results[1].result is None
    assert {batch.results[0].result.node_id, batch.results[2].result.node_id} == {1, 2}
    assert len(judge.calls) == 2 and batch.steps_used == 2 and batch.steps_left == 4
    out = briefs(batch.next_step)  # the bad item's step is still out: named by id, its brief not re-sent
    assert len(out) == 2 and [x.step_id for x in out if x.already_sent] == [b]
    with pytest.raises(UserError, match="items must be a list of 1 to 8"):
        svc.expand_nodes(sid, [])


# -- two processes ---------------------------------------------------------------------------------

def _expand_in_child(path: str, sid: str, steps: list[str], tag: str, out: Any) -> None:
    svc = service(Path(path))
    won = []
    for step in steps:
        try:
            svc.expand_node(sid, step, kernel_source=kernel(f"{tag}-{step}", speedup=1.25))
            won.append(step)
        except UserError:
            pass  # the other process has it, or had it
    out.put((tag, won))


# slow: two spawned processes, 12 s; leases and hand-outs in one process: the rest of this module
@pytest.mark.slow
def test_two_processes_expand_the_handed_out_steps_of_one_search(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    svc = service(path)
    sid = svc.start_search("t1", 8, seed=2)
    steps = [b.step_id for b in briefs(svc.next_step(sid, count=8))]
    assert len(set(steps)) == 8
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    # each tries every step, in opposite orders: they meet in the middle and must not both win one
    procs = [ctx.Process(target=_expand_in_child, args=(str(path), sid, order, tag, out))
             for tag, order in (("p0", steps), ("p1", steps[::-1]))]
    for p in procs:
        p.start()
    won = dict(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert sorted(won["p0"] + won["p1"]) == sorted(steps)  # every step expanded once, by one process
    tree = svc.get_search(sid)
    assert tree.steps_used == 8 and len(tree.nodes) == 9 and tree.nodes[0].visits == 8
    assert tree.pending_step_ids == [] and svc.next_step(sid).done
    rows = svc.store.read("SELECT step_id, status, node_id FROM steps WHERE search_id = ?", (sid,))
    assert len(rows) == 8 and all(r["status"] == "done" for r in rows)
    assert sorted(r["node_id"] for r in rows) == list(range(1, 9))


# -- the tools ---------------------------------------------------------------------------------------

KERNEL = "import triton\nclass ModelNew:\n    pass\n# fake: verdict=passed speedup=1.5\n"


def test_the_tools_hand_out_several_steps_and_answer_them_in_one_call(tmp_path: Path) -> None:
    app = App(Settings(home=tmp_path / "home", device="cpu"), judge=FakeJudge())

    async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
        result = await client.call_tool(tool, args)
        assert not result.is_error, result.content[0].text
        return result.structured_content

    async def scenario() -> None:
        async with Client(build_server(app=app), read_timeout_seconds=60) as client:
            sid = (await call(client, "start_search", task_id="scaled_softmax", budget=4))["search_id"]
            first = await call(client, "next_step", search_id=sid, count=2)
            ids = [first["step_id"], first["more_steps"][0]["step_id"]]
            batch = await call(client, "expand_nodes", search_id=sid, next=1, items=[
                {"step_id": ids[0], "kernel_source": KERNEL},
                {"step_id": ids[1], "kernel_source": KERNEL.replace("    pass", "    x = 1")},
            ])
            assert [r["ok"] for r in batch["results"]] == [True, True] and batch["steps_used"] == 2
            nxt = batch["next_step"]
            one = await call(client, "expand_node", search_id=sid, step_id=nxt["step_id"], kernel_source=KERNEL,
                             next=True)
            assert one["duplicate_of"] in (1, 2) and one["warnings"] and one["next_step"]["step_id"]

    try:
        anyio.run(scenario)
    finally:
        app.close()


def test_briefs_handed_out_together_say_the_shared_parts_once(tmp_path: Path) -> None:
    svc = service(tmp_path / "db.sqlite3")
    sid = svc.start_search("t1", 6)
    one = svc.next_step(sid)
    svc.expand_node(sid, one.step_id, kernel_source=kernel("a"))
    three = svc.next_step(sid, count=3)
    first, *more = briefs(three)
    assert len(more) == 2 and first.task is not None and first.instructions
    for b in more:  # each leaves out what equals the first brief's, and says which
        assert b.step_id and b.kind and {"task", "timing_note", "evaluated_shapes"} <= set(b.same_as_first)
        assert b.task is None and b.timing_note == ""
        if b.kind == first.kind:
            assert "instructions" in b.same_as_first and b.instructions == ""
    single = len(svc.next_step(sid, resend=True).model_dump_json())
    assert len(three.model_dump_json()) < 2 * single  # three steps for less than two whole briefs


def _refinement_answer(path: Path) -> tuple[SearchService, str, Any]:
    """Iterative refinement after one correct node: next_step(count=3) hands out three steps, all from node 1."""
    svc = service(path)
    sid = svc.start_search("t1", 8, strategy="iterative_refinement")
    one = svc.next_step(sid)
    svc.expand_node(sid, one.step_id, kernel_source=kernel("a"))
    return svc, sid, svc.next_step(sid, count=3)


def test_steps_grown_from_one_parent_carry_it_once(tmp_path: Path) -> None:
    svc, sid, three = _refinement_answer(tmp_path / "db.sqlite3")
    first, *more = briefs(three)
    assert first.kind == "small" and first.parent_kernel and first.working_memory  # refinement: all from node 1
    for b in more:
        assert b.parent_node_id == first.parent_node_id and b.same_parent_as == first.step_id
        assert b.parent_kernel is None and b.parent_evaluation is None and b.working_memory == []
        assert b.parent_kernel_uri == first.parent_kernel_uri  # the pointer stays: it is short
    resent = briefs(svc.next_step(sid, count=3, resend=True))
    assert [b.same_parent_as for b in resent] == [None, resent[0].step_id, resent[0].step_id]
    assert three.model_dump_json().count(json.dumps(first.parent_kernel)[1:-1]) == 1  # the kernel, written once


def test_a_parent_is_said_once_by_the_first_step_that_carries_it(tmp_path: Path) -> None:
    from adaexplore_mcp.search.brief_batch import share_parents
    from adaexplore_mcp.search.types import Brief

    def brief(step: str, parent: int | None, kernel_text: str | None = None, sent: bool = False) -> Brief:
        return Brief(search_id="s", step_id=step, kind="small" if kernel_text else "large", parent_node_id=parent,
                     parent_kernel=kernel_text, strategy="adaexplore", timing_available=True, budget=9,
                     steps_used=0, steps_left=9, already_sent=sent)

    out = share_parents([brief("a", 1, "k1"), brief("b", 2, "k2"), brief("c", 1, "k1"), brief("d", 2, "k2"),
                         brief("e", 0), brief("f", 1, "k1", sent=True), brief("g", 1, "k1 changed")])
    assert [b.same_parent_as for b in out] == [None, None, "a", "b", None, None, None]
    assert [b.parent_kernel for b in out] == ["k1", "k2", None, None, None, "k1", "k1 changed"]


def test_whole_steps_puts_back_what_an_answer_said_once(tmp_path: Path) -> None:
    from adaexplore_mcp.search.brief_batch import whole_steps

    _, _, three = _refinement_answer(tmp_path / "db.sqlite3")
    steps = whole_steps(three)
    assert [b.step_id for b in steps] == [three.step_id, *(b.step_id for b in three.more_steps)]
    for b in steps:  # each as next_step(count=1) would have written it
        assert b.parent_kernel == three.parent_kernel and b.working_memory == three.working_memory
        assert b.task == three.task and b.instructions and not b.same_as_first and b.same_parent_as is None
