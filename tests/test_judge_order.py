"""The order of one evaluation's steps, in the referee itself (judge/evaluation.py, run in this process on
the CPU). What must come before what: the candidate's compiled kernels are kept before its replay starts
(on a GPU the replay's runner would otherwise compile every kernel of a new source again: a search's
candidates are all new), the replay is sent after the replayed trial (drawn at random, never the first,
which may autotune; pinned to the second here) and read after the last one, so it runs beside them, and an
evaluation that ends early takes its replay's runner with it. After a pass, one more trial runs at the second
shape set (judge/checks/second_shapes.py).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pytest

from adaexplore_mcp.config import JudgeLimits
from adaexplore_mcp.judge import evaluation
from adaexplore_mcp.judge.checks import work
from adaexplore_mcp.judge.checks.trial_plan import TrialPlan
from adaexplore_mcp.judge.referee import Referee
from adaexplore_mcp.tasks.format import source_hash
from tests.test_judge_cases import AFFINE_TASK, GOOD, candidate


def request(source: str, trials: int) -> dict[str, Any]:
    task = {"module": f"ref_{source_hash(AFFINE_TASK)}", "source": AFFINE_TASK, "degenerate": False,
            "deterministic": True, "shapes": {}}
    return {"op": "evaluate", "task": task, "cand_module": f"cand_{source_hash(source)}", "cand_source": source,
            "limits": asdict(JudgeLimits(trials=trials)), "timeout_s": 120.0}


@pytest.fixture(scope="module")
def referee(tmp_path_factory: pytest.TempPathFactory):
    """One referee for the module (starting one costs 6 s on two busy cores); each test spies on its own steps."""
    tmp_path = tmp_path_factory.mktemp("order")
    ref = Referee("cpu", tmp_path / "home", tmp_path / "logs", tmp_path / "cache")
    yield ref
    ref.close()


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch, referee: Referee) -> list[Any]:
    seen: list[Any] = []
    trial_batch, keep, start, finish = (evaluation.Evaluation.trial_batch, Referee.keep_kernels,
                                        work.start_replay, work.finish_replay)

    def spy_trials(self: Any, first: int, count: int, n: int, seeds: Any = None) -> Any:
        seen.append(("trials", first, count))
        return trial_batch(self, first, count, n, seeds)

    def second_trial_replayed(n: int) -> TrialPlan:
        return TrialPlan(seeds=tuple(range(1, n + 1)), replayed=min(1, n - 1), reused_buffer=None, off_distribution=None)

    def spy_start(ev: Any) -> Any:
        pending = start(ev)
        seen.append(("start_replay", pending.replayer if pending else None))
        return pending

    def spy_finish(ev: Any, pending: Any) -> bool:
        seen.append("finish_replay")
        return finish(ev, pending)

    monkeypatch.setattr(evaluation.Evaluation, "trial_batch", spy_trials)
    monkeypatch.setattr(evaluation, "draw_plan", second_trial_replayed)
    monkeypatch.setattr(Referee, "keep_kernels", lambda *a, **k: (seen.append("keep_kernels"), keep(*a, **k)))
    monkeypatch.setattr(work, "start_replay", spy_start)
    monkeypatch.setattr(work, "finish_replay", spy_finish)
    return seen


def test_the_replay_starts_after_the_second_trial_with_the_kernels_kept_and_is_read_after_the_last(
        referee: Referee, steps: list[Any]) -> None:
    out = evaluation.evaluate(referee, request(GOOD, trials=5), lambda f, m: None).fields
    assert out["verdict"] == "passed", out
    names = [s if isinstance(s, str) else s[0] for s in steps]
    assert names == ["trials", "trials", "keep_kernels", "start_replay", "trials", "finish_replay", "trials",
                     "keep_kernels"], steps  # the last two: the second shape set, and what it compiled
    assert [s[1:] for s in steps if s[0] == "trials"] == [(0, 1), (1, 1), (2, 3), (5, 1)]  # the last: second shapes
    replayer = next(s[1] for s in steps if s[0] == "start_replay")
    assert replayer is not None and not replayer.alive  # killed once read
    assert out["work"]["replay"]["launches"] == 1
    stages = out["stages_ms"]
    assert list(stages).index("replay_start") < list(stages).index("replay_wait")
    assert len(referee.spares) == 2  # the replay's spare replaced at the end


def test_one_trial_is_replayed_itself_and_a_later_mismatch_kills_the_pending_replay(
        referee: Referee, steps: list[Any]) -> None:
    out = evaluation.evaluate(referee, request(GOOD, trials=1), lambda f, m: None).fields
    assert out["verdict"] == "passed", out
    assert [s if isinstance(s, str) else s[0] for s in steps] == ["trials", "keep_kernels", "start_replay",
                                                                  "finish_replay", "trials", "keep_kernels"]
    steps.clear()
    # right on its first two calls, wrong from the third: the replay sent after the second never gets read
    flaky = candidate("        self.calls += 1\n        return affine(x) if self.calls <= 2 else affine(x) + 1",
                      init="        self.calls = 0")
    out = evaluation.evaluate(referee, request(flaky, trials=5), lambda f, m: None).fields
    assert out["verdict"] == "mismatch", out
    assert "finish_replay" not in steps
    replayer = next(s[1] for s in steps if isinstance(s, tuple) and s[0] == "start_replay")
    assert replayer is not None and not replayer.alive  # killed when the evaluation ended


def test_a_cpu_evaluation_sends_few_requests_releases_riding_on_the_next_one(
        referee: Referee, steps: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Round trips to the runners (ADAEXPLORE_TRACE_OPS counts them, per role and request): on the CPU a release
    nobody reads goes with the runner's next request, and a candidate's runner is killed without one. Five trials
    send 22 requests, 3 of them releases (two sent by the replay's check, and the reference's last, which accounts
    its memory)."""
    monkeypatch.setenv("ADAEXPLORE_TRACE_OPS", "1")
    out = evaluation.evaluate(referee, request(GOOD, trials=5), lambda f, m: None).fields
    assert out["verdict"] == "passed", out
    ops = {k: v[0] for k, v in out["ops_ms"].items() if not k.startswith(("imports", "prof"))}
    releases = sum(v for k, v in ops.items() if k.endswith(".release"))
    assert sum(ops.values()) <= 22 and releases <= 3, ops
