"""Several searches at once, and two expand_node calls racing on one step."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from adaexplore_mcp.errors import UserError
from adaexplore_mcp.search import SearchService
from adaexplore_mcp.search.fake_judge import FakeEvaluator, FakeJudge, fake_verdict
from adaexplore_mcp.store import Store


def service(path, judge: FakeJudge | None = None) -> SearchService:
    store = Store(path)
    return SearchService(store, FakeEvaluator(store, judge))


def kernel(k: int) -> str:
    verdict = "mismatch" if k % 4 == 3 else "passed"
    return f"class ModelNew: pass  # {k}\n# fake: verdict={verdict} speedup={1 + k % 5}\n"


def drive(svc: SearchService, search_id: str, steps: int) -> None:
    for k in range(steps):
        b = svc.next_step(search_id)
        svc.expand_node(search_id, b.step_id, kernel_source=kernel(k), note=f"k={k}")


@pytest.mark.parametrize("shared_service", [True, False], ids=["one-service", "service-per-thread"])
def test_searches_on_several_tasks_run_concurrently(tmp_path, shared_service):
    path = tmp_path / "db.sqlite3"
    svc = service(path)
    ids = [svc.start_search(f"task{i}", 25, seed=i, strategy=s)
           for i, s in enumerate(["adaexplore", "iterative_refinement", "parallel_sampling", "adaexplore"] * 2)]

    def worker(sid: str) -> None:
        own = svc if shared_service else service(path)
        drive(own, sid, 25)

    with ThreadPoolExecutor(len(ids)) as pool:
        list(pool.map(worker, ids))
    for sid in ids:
        tree = svc.get_search(sid)
        assert tree.steps_used == 25 and len(tree.nodes) == 26 and tree.nodes[0].visits == 25
        assert svc.next_step(sid).done


def test_two_concurrent_expands_of_one_step_exactly_one_wins(tmp_path):
    entered = threading.Event()

    def slow(source):
        entered.set()
        time.sleep(0.3)
        return fake_verdict(source)

    fake = FakeJudge(slow)
    path = tmp_path / "db.sqlite3"
    svcs = [service(path, fake) for _ in range(2)]
    sid = svcs[0].start_search("t1", 5)
    step = svcs[0].next_step(sid).step_id
    outcomes: list[object] = []

    def expand(svc):
        try:
            outcomes.append(svc.expand_node(sid, step, kernel_source=kernel(0)))
        except UserError as exc:
            outcomes.append(exc)

    first = threading.Thread(target=expand, args=(svcs[0],))
    first.start()
    entered.wait(5)
    with pytest.raises(UserError, match="is being evaluated"):
        svcs[1].next_step(sid)
    second = threading.Thread(target=expand, args=(svcs[1],))
    second.start()
    first.join()
    second.join()
    wins = [o for o in outcomes if not isinstance(o, Exception)]
    losses = [o for o in outcomes if isinstance(o, Exception)]
    assert len(wins) == 1 and len(losses) == 1 and "being evaluated" in str(losses[0])
    assert svcs[1].get_search(sid).steps_used == 1 and len(fake.calls) == 1


def test_racing_expands_released_at_the_same_instant_add_one_node(tmp_path):
    path = tmp_path / "db.sqlite3"
    judge = FakeJudge()
    svc = service(path, judge)
    sid = svc.start_search("t1", 50)
    for round_ in range(10):
        step = svc.next_step(sid).step_id
        barrier = threading.Barrier(4)
        results: list[bool] = []

        def expand():
            own = service(path, judge)
            barrier.wait()
            try:
                own.expand_node(sid, step, kernel_source=kernel(round_))
                results.append(True)
            except UserError:
                results.append(False)

        threads = [threading.Thread(target=expand) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results.count(True) == 1
    assert svc.get_search(sid).steps_used == 10
