"""The shape of the judge: one ordered list of checks (judge/checks/pipeline.py), the referee's answer typed with its
control flags apart (judge/result.py), runners that answer only their role's requests, and releases that ride on
the next request (judge/processes/runners.py). No runner process here: the parts alone."""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

from adaexplore_mcp.judge.checks import pipeline
from adaexplore_mcp.judge.checks.pipeline import PIPELINE, Step, run_pipeline
from adaexplore_mcp.judge.outcome import Outcome
from adaexplore_mcp.judge.result import Control, Gone, RefereeResult
from adaexplore_mcp.judge.runner import Runner, role_for
from adaexplore_mcp.judge.runner_candidate import CandidateRunner
from adaexplore_mcp.judge.runner_reference import ReferenceRunner
from adaexplore_mcp.judge.runner_replay import ReplayRunner
from adaexplore_mcp.judge.processes.runners import merged_release, with_release
from adaexplore_mcp.models import Verdict


def test_the_spine_lists_every_check_in_order_each_naming_the_shortcut_it_answers() -> None:
    assert [s.name for s in PIPELINE] == ["load", "build", "trials", "source_precision", "work", "second_shape_set",
                                          "timing", "roofline"]
    assert [s.name for s in PIPELINE if s.gpu_only] == ["timing", "roofline"]
    for step in PIPELINE:
        module = importlib.import_module(step.check.__module__)
        assert module.__doc__ and step.check.__doc__, step.name  # the shortcut, and what the check does
        assert step.name in pipeline.__doc__


def test_the_walk_stops_at_the_first_failure_and_skips_gpu_checks_on_the_cpu() -> None:
    ran: list[str] = []
    marks: list[str] = []

    def check(name: str, fail: bool = False) -> Any:
        def run(ev: Any) -> None:
            ran.append(name)
            if fail:
                ev.out.reject("x", name)
        return run

    ev = SimpleNamespace(out=Outcome(), device="cpu", mark=marks.append, progress=lambda f, m: None)
    run_pipeline(ev, (Step("a", check("a"), mark="a_done"), Step("gpu", check("gpu"), gpu_only=True),
                      Step("b", check("b", fail=True)), Step("c", check("c"))))
    assert ran == ["a", "b"] and marks == ["a_done"] and ev.out.verdict == Verdict.rejected


def test_the_referees_answer_keeps_its_control_flags_apart_from_the_result() -> None:
    out = Outcome()
    out.oom = True
    out.reject("work_not_replayable", "out of memory in the replay")
    sent = out.result()
    assert sent.control == Control(recycle=True, oom_retry=True) and sent.control.spent
    assert not {"recycle", "oom_retry", "poisoned", "gone", "internal_error"} & set(sent.fields)
    gone = RefereeResult({"verdict": "timeout"}, Control(gone=Gone("timeout", log="stack", status=9)))
    assert RefereeResult.from_wire(gone.to_wire()) == gone
    bug = RefereeResult.failed("Traceback ...")
    assert bug.control.poisoned and bug.control.internal_error and bug.control.spent and bug.fields == {}
    assert not RefereeResult({"verdict": "passed"}).control.spent


def test_each_role_answers_only_its_own_requests() -> None:
    shared = {"release", "kernel_files"}
    assert set(Runner.REQUESTS) == shared
    assert set(ReplayRunner.REQUESTS) == shared | {"replay_prepare", "replay"}
    model = {"load", "build", "perturb", "profile", "time", "timed_outputs"}
    assert set(CandidateRunner.REQUESTS) == shared | model | {"unstash", "load_state", "forward", "program"}
    assert set(ReferenceRunner.REQUESTS) == shared | model | {"state", "make", "outputs", "rerun", "cost", "compile",
                                                              "meta", "float64"}
    runner = ReplayRunner.__new__(ReplayRunner)
    runner.kept = {"out": 1}
    assert "unknown request 'forward'" in runner.answer({"op": "forward"}, [], [])["internal"]
    assert runner.kept == {"out": 1}
    assert role_for({"op": "load", "role": "ref"}) is ReferenceRunner
    assert role_for({"op": "load", "role": "cand"}) is CandidateRunner
    assert role_for({"op": "replay_prepare"}) is ReplayRunner and role_for({"op": "replay"}) is ReplayRunner
    assert role_for({"op": "forward"}) is CandidateRunner and role_for({"op": "make"}) is ReferenceRunner
    assert role_for({"op": "release"}) is None and role_for({"op": "build"}) is None  # shared, or two roles'
    assert role_for({"op": "nothing"}) is None and role_for({"op": "load", "role": "other"}) is None


def test_a_release_first_is_done_before_the_request_it_rides_on() -> None:
    seen: list[dict] = []

    class Looking(ReplayRunner):
        REQUESTS = {**ReplayRunner.REQUESTS, "look": lambda self, req, bufs, out: seen.append(dict(self.kept)) or {}}

    runner = Looking.__new__(Looking)
    runner.kept, runner.device, runner.work_trace = {"out": 1, "trial": 2, "trial/packs": 3}, "cpu", None
    runner.answer({"op": "look", "release_first": {"only": "trial"}}, [], [])
    assert seen == [{"out": 1}]


def test_deferred_releases_merge_into_one() -> None:
    keep = {"op": "release", "keep_cache": True}
    assert merged_release(keep, keep) == keep
    assert merged_release(keep, {"op": "release"}) == {"op": "release", "keep_cache": False}
    assert merged_release({"op": "release", "only": "a"}, {"op": "release", "only": "b"}) == \
        {"op": "release", "keep_cache": False}
    assert merged_release({"op": "release", "only": "a"}, {"op": "release", "only": "a", "last": True}) == \
        {"op": "release", "keep_cache": False, "only": "a", "last": True}
    assert with_release({"op": "make", "key": "trial"}, keep) == {"op": "make", "key": "trial",
                                                                  "release_first": {"keep_cache": True}}
    assert with_release({"op": "release", "only": "replay"}, {"op": "release"}) == {"op": "release",
                                                                                   "keep_cache": False}
