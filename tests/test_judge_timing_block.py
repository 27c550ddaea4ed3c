"""The timed block's protocol (referee_timing._block and the runner's priming), without a GPU.

On a GPU a fresh candidate process paid cudaMalloc inside its timed calls, which made its kernels look
2-4x slower than an independent harness measured them (bench/timing_agreement.py): the runner now runs
a block's calls once untimed on a decoy set, says "primed", and the referee's wall clock starts only
then, with the timed sets lent after it.
"""

from __future__ import annotations

import json
import time
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from adaexplore_mcp.judge import referee_timing, wire
from adaexplore_mcp.judge.runner_candidate import CandidateRunner
from adaexplore_mcp.judge.runner_reference import ReferenceRunner
from adaexplore_mcp.judge.processes.runners import RunnerHandle


@pytest.fixture(autouse=True)
def _no_cuda_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)


def lend(sets: list) -> dict:
    return {"sets": [[float(v) for v in s] for s in sets]}  # what travels does not matter to _block


def test_the_wall_clock_starts_when_the_runner_says_primed_and_the_sets_follow_it() -> None:
    sent: list[dict] = []

    def call(header: dict, buffers: list) -> tuple[dict, list]:
        sent.append(header)
        if header["op"] == "time":
            time.sleep(0.2)  # the untimed pass, on the decoy: not the candidate's time
            return {"primed": True}, []
        time.sleep(0.02)
        return {"times_ms": [0.5, 0.5]}, []

    times, wall, outs = referee_timing._block(call, {"calls": 2, "decoy": lend([[9.0]])}, [[1.0], [2.0]], lend)
    assert [h["op"] for h in sent] == ["time", "time_sets"]
    assert sent[0]["prime"] is True and sent[0]["calls"] == 2 and "sets" not in sent[0]
    assert sent[1]["sets"] == [[1.0], [2.0]]  # the timed sets only after "primed"
    assert times == [0.5, 0.5] and outs == []
    assert 15 <= wall < 150, wall


def test_a_runner_that_answers_without_priming_is_never_lent_the_timed_sets() -> None:
    sent: list[dict] = []

    def call(header: dict, buffers: list) -> tuple[dict, list]:
        sent.append(header)
        return {"times_ms": [0.5]}, []

    times, wall, outs = referee_timing._block(call, {"calls": 1}, [[1.0]], lend)
    assert [h["op"] for h in sent] == ["time"] and times == [] and "internal" in outs[0]


def test_a_failure_during_priming_comes_back_as_the_blocks_answer() -> None:
    failure = {"verdict": "runtime_error", "error": {"exception": "RuntimeError", "message": "boom"}}
    times, wall, outs = referee_timing._block(lambda h, b: (failure, []), {"calls": 3}, [[1.0]], lend)
    assert times == [] and wall == 0.0 and outs == [failure]


class _Conn:
    """Both ends of the runner's pipe: what it sends is kept, what it receives is queued."""

    def __init__(self, incoming: list[bytes] = ()) -> None:
        self.frames: list[bytes] = []
        self.incoming = list(incoming)

    def send_bytes(self, data: bytes) -> None:
        self.frames.append(bytes(data))

    def recv_bytes(self, max_bytes: int) -> bytes:
        return self.incoming.pop(0)


def test_priming_runs_every_call_once_on_the_decoy_keeping_their_outputs_then_says_primed() -> None:
    import weakref

    runner = CandidateRunner.__new__(CandidateRunner)
    runner.handlers = {}  # what __init__ takes: the signal handlers put back after user code
    runner.conn = _Conn()
    outputs: list[weakref.ref] = []
    alive_at_each_call: list[int] = []
    seen: list[torch.Tensor] = []

    def model(x: torch.Tensor, scale: float) -> torch.Tensor:
        alive_at_each_call.append(sum(r() is not None for r in outputs))
        seen.append(x)
        out = x * scale + 1
        outputs.append(weakref.ref(out))
        return out

    decoy = [torch.full((3,), 7.0), 2.0]
    runner._prime(model, decoy, 5)
    assert alive_at_each_call == [0, 1, 2, 3, 4]  # all alive together, as the timed pass keeps them
    assert all(x is decoy[0] for x in seen)  # only the decoy: the timed sets have not been sent yet
    assert all(r() is None for r in outputs)  # then dropped: their memory goes back to the allocator
    header = wire.json.loads(runner.conn.frames[0].decode())
    assert header["primed"] is True


def test_the_runner_says_primed_before_it_receives_the_timed_sets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Played through `op_time` with a CPU stand-in for the bench: the order of messages on the pipe is
    the protocol (decoy in the request; "primed"; then the sets; then the times)."""
    from adaexplore_mcp.judge import timing

    events: list[str] = []

    class FakeBench:
        def block(self, call: Any, calls: int, warmup: int) -> tuple[list[float], list]:
            return [0.1] * calls, [call(i) for i in range(calls)]

    monkeypatch.setattr(timing, "Bench", FakeBench)
    sets_message: list[bytes] = []
    wire.send(type("C", (), {"send_bytes": lambda self, d: sets_message.append(bytes(d))})(),
              {"op": "time_sets", "sets": wire.encode_value([[1.0], [2.0]], [])})
    runner = CandidateRunner.__new__(CandidateRunner)
    runner.handlers = {}  # what __init__ takes: the signal handlers put back after user code
    runner.conn = _Conn(sets_message)
    runner.kept, runner.bench, runner.role, runner.compiled = {}, None, "cand", None
    runner.model = lambda x: events.append(f"call {x}") or x * 2
    original_recv = runner.conn.recv_bytes
    runner.conn.recv_bytes = lambda n: (events.append("sets received"), original_recv(n))[1]
    reply = runner.op_time({"op": "time", "prime": True, "calls": 2,
                            "decoy": {"sets": wire.encode_value([[9.0]], [])}}, [], [])
    primed_at = events.index("sets received")
    assert events[:primed_at] == ["call 9.0", "call 9.0"] and runner.conn.frames  # primed was sent first
    assert events[primed_at + 1:] == ["call 1.0", "call 2.0"] and reply == {"times_ms": [0.1, 0.1]}


def test_the_referee_picks_the_checked_outputs_after_the_block_and_maps_only_those() -> None:
    kept = [torch.full((2,), float(i)) for i in range(6)]
    requests: list[dict] = []

    def call(header: dict, buffers: list) -> tuple[dict, list]:
        requests.append(header)
        if header["op"] == "time":
            return {"primed": True}, []
        if header["op"] == "time_sets":
            return {"times_ms": [0.1] * 6}, []  # the times come without outputs
        bufs: list = []
        chosen = [kept[i] for i in header["indices"]]
        return {"outputs": wire.encode_value(chosen, bufs, pack=False)["list"]}, bufs

    times, _, outs = referee_timing._block(call, {"calls": 6}, [[1.0]], lend, pick=lambda calls: [4, 1])
    assert len(times) == 6 and [r["op"] for r in requests] == ["time", "time_sets", "timed_outputs"]
    assert requests[2]["indices"] == [4, 1]
    assert [(i, o.tolist()) for i, o in outs] == [(4, [4.0, 4.0]), (1, [1.0, 1.0])]


def test_a_runner_that_withholds_the_picked_outputs_fails_the_block() -> None:
    def call(header: dict, buffers: list) -> tuple[dict, list]:
        answers = {"time": {"primed": True}, "time_sets": {"times_ms": [0.1, 0.1]}, "timed_outputs": {"outputs": []}}
        return answers[header["op"]], []

    times, _, outs = referee_timing._block(call, {"calls": 2}, [[1.0]], lend, pick=lambda calls: [0])
    assert times == [] and "internal" in outs[0]


@pytest.mark.parametrize("calls, sets", [(32, 64), (32, 32), (32, 5), (8, 1), (3, 1), (1, 1)])
def test_the_checked_calls_are_distinct_and_include_a_pair_on_the_same_inputs_when_sets_repeat(calls, sets) -> None:
    for _ in range(50):
        chosen = referee_timing.pick_checked(calls, sets, 4)
        assert len(chosen) == min(4, calls) == len(set(chosen))
        assert all(0 <= i < calls for i in chosen)
        if sets < calls and len(chosen) >= 2:
            assert any((i + sets) in chosen for i in chosen), chosen


def _ev_for_checks() -> Any:
    from types import SimpleNamespace

    from adaexplore_mcp.config import JudgeLimits
    from adaexplore_mcp.judge.evaluation import Outcome

    return SimpleNamespace(out=Outcome(), limits=JudgeLimits(), tol=(1e-2, 1e-2))


def test_one_storage_returned_for_two_calls_is_an_output_cache() -> None:
    ev, same = _ev_for_checks(), torch.ones(3)
    assert not referee_timing._check_block(ev, [(0, same), (5, same)], {0: torch.ones(3)}, 1, 6, 6)
    assert ev.out.fields["rejected"]["check"] == "output_reused_across_calls"


def test_a_picked_output_that_differs_is_a_timed_mismatch_and_right_ones_pass() -> None:
    ev = _ev_for_checks()
    expected = {0: torch.zeros(3), 1: torch.ones(3)}  # by set index: call i was given set i % 2
    assert referee_timing._check_block(ev, [(0, torch.zeros(3)), (3, torch.ones(3))], expected, 2, 4, 4)
    assert not referee_timing._check_block(ev, [(2, torch.ones(3))], expected, 2, 4, 4)
    assert ev.out.fields["rejected"]["check"] == "timed_output_mismatch"
    short = _ev_for_checks()
    assert not referee_timing._check_block(short, [(0, torch.zeros(3))], expected, 2, 4, 3)
    assert "reported 3 times for 4 calls" in short.out.fields["rejected"]["message"]


def test_the_runner_returns_only_the_picked_timed_outputs_and_refuses_bad_indices() -> None:
    runner = CandidateRunner.__new__(CandidateRunner)
    runner.handlers = {}  # what __init__ takes: the signal handlers put back after user code
    runner.kept = {"timed": ([torch.zeros(2), torch.ones(2)], [])}
    bufs: list = []
    reply = runner.op_timed_outputs({"indices": [1]}, [], bufs)
    (got,) = wire.decode_value({"list": reply["outputs"]}, bufs)
    assert got.tolist() == [1.0, 1.0]
    for bad in ([2], [-1], ["0"], [True], "0"):
        assert "internal" in runner.op_timed_outputs({"indices": bad}, [], [])


def test_the_reference_computes_outputs_only_for_the_picked_sets_from_its_own_inputs() -> None:
    runner = ReferenceRunner.__new__(ReferenceRunner)
    runner.handlers = {}  # what __init__ takes: the signal handlers put back after user code
    runner.device = "cpu"
    calls: list[float] = []

    def writes_its_input(x: torch.Tensor) -> torch.Tensor:
        calls.append(float(x[0]))
        y = x * 2
        x.zero_()  # a reference allowed to write its input: the kept copy must survive it
        return y

    runner.model = writes_its_input
    runner.kept = {"timing": [([torch.full((2,), float(k))], None) for k in range(4)]}
    bufs: list = []
    reply = runner.op_outputs({"key": "timing", "indices": [3, 1, 3]}, [], bufs)
    assert reply["indices"] == [1, 3] and calls == [1.0, 3.0]
    got = wire.decode_value({"list": reply["outputs"]}, bufs)
    assert [t.tolist() for t in got] == [[2.0, 2.0], [6.0, 6.0]]
    assert runner.kept["timing"][3][0][0].tolist() == [3.0, 3.0]
    for bad in ([4], [-1], ["0"], [True], "0"):
        assert "internal" in runner.op_outputs({"key": "timing", "indices": bad}, [], [])


def test_what_happens_after_the_answer_until_the_picked_outputs_are_mapped_is_on_the_wall_clock() -> None:
    """A runner that answers before its work is done is caught when the picked outputs are fetched: the
    wait counts (it costs the same in every honest block, so it cancels in the slope)."""
    def call(header: dict, buffers: list) -> tuple[dict, list]:
        if header["op"] == "time":
            return {"primed": True}, []
        if header["op"] == "time_sets":
            return {"times_ms": [0.01, 0.01]}, []
        time.sleep(0.08)  # the work it deferred past its answer, finishing before the outputs can be shared
        bufs: list = []
        return {"outputs": wire.encode_value([torch.zeros(1)], bufs, pack=False)["list"]}, bufs

    _, wall, _ = referee_timing._block(call, {"calls": 2}, [[1.0]], lend, pick=lambda calls: [1])
    assert wall >= 75, wall


def test_a_new_draw_drops_the_old_sets_of_its_key_before_it_allocates() -> None:
    """Why blocks below EARLY_RELEASE_BYTES need no `release` between them: the reference's next `make`
    under a key lets go of that key's old sets (and their packs and outputs) before get_inputs() runs,
    so its allocator reuses their memory instead of holding two blocks at once."""
    runner = ReferenceRunner.__new__(ReferenceRunner)
    runner.handlers = {}  # what __init__ takes: the signal handlers put back after user code
    runner.device = "cpu"
    seen_when_drawing: list[list[str]] = []

    class Module:
        @staticmethod
        def get_inputs() -> list[torch.Tensor]:
            seen_when_drawing.append(sorted(runner.kept))
            return [torch.randn(3)]

    runner.module = Module
    runner.kept = {"timing": [([torch.zeros(3)], None)], "timing/packs": [], "timing/outputs": {}, "trial": ["kept"]}
    reply = runner.op_make({"key": "timing", "seeds": [1, 2], "outputs": False}, [], [])
    assert len(reply["sets"]) == 2
    assert seen_when_drawing == [["trial"], ["trial"]]  # other keys stay; this key's old sets went first
    assert sorted(runner.kept) == ["timing", "timing/packs", "trial"] and len(runner.kept["timing"]) == 2


# -- a runner's numbers: JSON lets a runner send an integer of 400 digits, and float() of it raises ---------------

HUGE = json.loads("1" + "0" * 400)  # valid JSON, as the wire parses it


@pytest.mark.parametrize("value", [HUGE, -HUGE, float("nan"), float("inf"), -float("inf"), True, False, "1.5", None,
                                   [1.0], {"float": "1.0"}])
def test_what_is_not_a_finite_number_is_refused(value: Any) -> None:
    assert wire.finite_number(value) is None


def test_finite_numbers_come_back_as_floats() -> None:
    assert [wire.finite_number(v) for v in (0, 3, -2.5, 1e308)] == [0.0, 3.0, -2.5, 1e308]
    assert isinstance(wire.finite_number(3), float)


def test_a_timed_block_with_a_time_too_large_for_a_float_drops_it_and_raises_nothing() -> None:
    """Red team, round 13: `float()` of it raised OverflowError, which `evaluate` did not catch ("a bug in the
    judge"). Dropped, the block reports fewer times than calls, and `_check_block` rejects it for that."""
    replies = iter([{"primed": True}, json.loads('{"times_ms": [0.5, 1' + "0" * 400 + ', NaN, true]}')])
    times, _, outs = referee_timing._block(lambda h, b: (next(replies), []), {"calls": 4}, [[1.0]], lend)
    assert times == [0.5] and outs == []


def test_the_profile_share_ignores_kernel_times_that_are_not_finite_numbers() -> None:
    reply = {"kernels": [["affine_kernel", 3], ["other", HUGE], ["lib_kernel", 1.0], ["bool", True]]}
    out = SimpleNamespace(kernels=["affine_kernel"], warnings=[])
    ev = SimpleNamespace(make_inputs=lambda seeds, key: [([torch.zeros(2)], None)], set_bytes=0, out=out,
                         cand_call=lambda header, buffers: (reply, []))
    assert referee_timing.profile_share(ev)["candidate_kernel_share"] == 0.75
    assert referee_timing.profile_share(SimpleNamespace(**{**vars(ev), "cand_call": lambda h, b: (
        {"kernels": [["affine_kernel", HUGE]]}, [])})) is None


def test_an_op_trace_ignores_numbers_that_are_not_finite() -> None:
    handle = RunnerHandle.__new__(RunnerHandle)
    handle.trace, handle.role = {}, "cand"
    handle._trace("forward", time.perf_counter(), {"op_ms": HUGE, "op_imports": [HUGE, "torch"],
                                                   "op_prof": [["f", HUGE, 1.0], ["g", 2.0, 1.0]]})
    assert handle.trace["cand.forward"][2] == 0.0 and handle.trace["imports cand.forward torch"] == [0.0]
    assert "prof cand.forward f" not in handle.trace and handle.trace["prof cand.forward g"] == [1, 2.0, 1.0]


def test_an_arithmetic_error_reading_a_runners_answer_rejects_the_candidate(monkeypatch: pytest.MonkeyPatch) -> None:
    """The backstop: whatever conversion is missed, a runner's number too large for a float is its candidate's
    malformed answer (rejected), never an exception out of the referee."""
    import shutil
    import tempfile
    from pathlib import Path

    from adaexplore_mcp.judge import evaluation
    from adaexplore_mcp.judge.referee import Referee
    from tests.test_judge_cases import referee_request

    def overflow(self: Any) -> None:
        float(HUGE)

    monkeypatch.setattr(evaluation.Evaluation, "run", overflow)
    home = Path(tempfile.mkdtemp(dir="/var/tmp"))  # not under /tmp: the runners' private /tmp would hide it
    referee = Referee("cpu", home, home / "logs", home / "cache")
    req = referee_request("overflow")
    try:
        result = evaluation.evaluate(referee, req, lambda fraction, message: None).fields
    finally:
        referee.close()
        shutil.rmtree(home, ignore_errors=True)
    assert result["verdict"] == "rejected" and result["rejected"]["check"] == "bad_output", result
    assert "OverflowError" in result["rejected"]["message"]
