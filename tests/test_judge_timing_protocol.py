"""The whole timing protocol of `referee_timing.time_candidate`, played against fake runners on the CPU.

The GPU path cannot run here, so its message sequence is checked with runners that answer the same ops
over the same wire encoding (CPU tensors travel as bytes): the estimate, four candidate blocks (primed,
times only, then the outputs the referee picked), the reference's blocks, the verdict. What it shows:
an honest candidate passes with the speedup its times say; every candidate block gets fresh input sets;
a candidate that answers from an output cache filled in an earlier block, or returns one storage for two
calls, is rejected.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from adaexplore_mcp.config import JudgeLimits
from adaexplore_mcp.judge.checks.roofline import check_faster_than_hardware
from adaexplore_mcp.judge import referee_baselines, referee_timing, wire
from adaexplore_mcp.judge.reference_timings import ReferenceTimings
from adaexplore_mcp.judge.evaluation import Outcome
from adaexplore_mcp.models import Verdict

SHAPE = (4, 8)


def reference(x: torch.Tensor) -> torch.Tensor:
    return x * 2 + 1


class FakeRunner:
    """A runner's timing ops over the wire encoding; `model(x, call_index, block)` plays ModelNew (or Model)."""

    def __init__(self, model: Any, times_ms: float, role: str) -> None:
        self.model, self.times_ms, self.role = model, times_ms, role
        self.kept: dict[str, Any] = {}
        self.headers: list[dict] = []
        self.drawn: list[list[int]] = []  # the seeds of every `make`, in order
        self.block = 0  # timed blocks so far
        self.primed_on: list[torch.Tensor] = []  # the decoy each block primed on
        self.calls = 0

    def call(self, header: dict, buffers: list = ()) -> tuple[dict, list]:
        self.headers.append(header)
        return getattr(self, f"op_{header['op']}")(header, list(buffers))

    def op_make(self, req: dict, bufs: list) -> tuple[dict, list]:
        self.drawn.append(list(req["seeds"]))
        self.kept.pop(req["key"], None)  # a new draw under a key replaces the last (as in runner.op_make)
        sets, out = [], []
        for seed in req["seeds"]:
            x = torch.randn(SHAPE, generator=torch.Generator().manual_seed(seed % (1 << 62)))
            entry = {"inputs": wire.encode_value([x], out)}
            if req.get("outputs", True):
                entry["output"] = wire.encode_value(reference(x), out)
            sets.append(entry)
            self.kept.setdefault(req["key"], []).append(x)
        return {"sets": sets}, out

    def op_outputs(self, req: dict, bufs: list) -> tuple[dict, list]:
        out: list = []
        wanted = sorted(set(req["indices"]))
        results = [reference(self.kept[req["key"]][i]) for i in wanted]
        return {"indices": wanted, "outputs": wire.encode_value(results, out)["list"]}, out

    @staticmethod
    def _sets(lent: dict) -> list[list[Any]]:
        return [list(s) for s in wire.decode_value(lent["sets"], [bytes.fromhex(h) for h in lent["cpu_bytes"]])]

    def op_time(self, req: dict, bufs: list) -> tuple[dict, list]:
        """Primes on the decoy (the block's calls, untimed), then waits for the timed sets."""
        assert req.get("prime") and "sets" not in req, "the timed sets must not travel with the request to prime"
        (decoy,) = self._sets(req["decoy"])
        self.primed_on.append(decoy[0])
        self.calls = int(req["calls"])
        return {"primed": True}, []

    def op_time_sets(self, req: dict, bufs: list) -> tuple[dict, list]:
        sets = self._sets(req)
        self.block += 1
        outs = [self.model(sets[i % len(sets)][0], i, self.block) for i in range(self.calls)]
        self.kept["timed"] = outs
        return {"times_ms": [self.times_ms] * len(outs)}, []

    def op_timed_outputs(self, req: dict, bufs: list) -> tuple[dict, list]:
        out: list = []
        chosen = [self.kept["timed"][i] for i in req["indices"]]
        return {"outputs": wire.encode_value(chosen, out, pack=False)["list"]}, out

    def op_profile(self, req: dict, bufs: list) -> tuple[dict, list]:
        return {"kernels": [["fake_kernel", 1.0]]}, []

    def op_release(self, req: dict, bufs: list) -> tuple[dict, list]:
        self.kept.clear()
        return {"ok": True, "reserved": 0}, []


def fake_ev(cand: FakeRunner, ref: FakeRunner, home: Any, timings: dict | None = None) -> SimpleNamespace:
    """`timings`: the referee's reference timings by task key (pass one dict to several evaluations)."""
    timings = {} if timings is None else timings

    def call_ref(r: Any, header: dict, deadline: float, what: str, buffers: list = ()) -> tuple[dict, list]:
        return ref.call(header, buffers)

    def make_inputs(seeds: list[int], key: str) -> list[tuple[list[Any], Any]]:
        reply, bufs = ref.call({"op": "make", "seeds": seeds, "key": key})
        return [(list(wire.decode_value(s["inputs"], bufs)), wire.decode_value(s["output"], bufs))
                for s in reply["sets"]]

    referee = SimpleNamespace(wait_spares=lambda deadline: None, home=home, physical_index=0, gpu_name="fake GPU",
                              call_ref=call_ref, ref_timings=lambda key: timings.setdefault(key, ReferenceTimings()))
    killed: list[bool] = []
    return SimpleNamespace(
        out=Outcome(), limits=JudgeLimits(), referee=referee, in_bytes=128, out_bytes=128, set_bytes=512, keep_cache=True,
        cand_call=lambda header, buffers=(), max_reply=0: cand.call(header, buffers),
        cand=SimpleNamespace(retire=lambda: (killed.append(True), cand.headers.append({"op": "<killed>"}))),
        release=lambda: None,
        ref=SimpleNamespace(key=("fake", ()), runner=SimpleNamespace(alive=True)), deadline=time.monotonic() + 60,
        make_inputs=make_inputs, tol=(1e-4, 1e-4), mark=lambda stage: None, req={"task": {}}, killed=killed)


@pytest.fixture(autouse=True)
def _cpu_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)

    def lend(sets: list) -> dict:
        """On a GPU lent sets are IPC handles and need no buffers; here their bytes ride in the header."""
        buffers: list = []
        return {"sets": wire.encode_value(sets, buffers, pack=False), "cpu_bytes": [bytes(b).hex() for b in buffers]}

    monkeypatch.setattr(referee_timing._Sides, "lend", staticmethod(lend))
    monkeypatch.setattr(referee_timing, "_warm_clocks", lambda: None)
    monkeypatch.setattr(referee_timing, "hardware_context",
                        lambda ev: {"cost": "not counted here", "peak": None, "clocks": None})

    def no_compile(ev: Any, compiled: dict) -> bool:
        compiled["unavailable"] = "not compiled in this test"
        return False

    monkeypatch.setattr(referee_timing, "compile_ready", no_compile)
    monkeypatch.setattr(referee_baselines, "compile_ready", no_compile)
    monkeypatch.setattr(referee_timing, "compile_settled", lambda ev, timings: True)  # never compiled here


def time_and_check(ev: SimpleNamespace) -> None:
    """The pipeline's last two checks (checks/pipeline.py): the timing, then the roofline, which sets the speedups."""
    referee_timing.time_candidate(ev)
    if not ev.out.done:
        check_faster_than_hardware(ev)


def run(cand_model: Any, tmp_path: Any, cand_ms: float = 0.05) -> tuple[SimpleNamespace, FakeRunner, FakeRunner]:
    cand = FakeRunner(cand_model, cand_ms, "cand")
    ref = FakeRunner(lambda x, i, block: reference(x), 0.2, "ref")
    ev = fake_ev(cand, ref, tmp_path)
    time_and_check(ev)
    return ev, cand, ref


def test_the_candidate_is_profiled_after_its_timed_blocks_and_before_it_is_killed(tmp_path: Any) -> None:
    """torch.profiler leaves CUPTI in the process it ran in, slowing every later launch there: a profile
    before the timed blocks made honest candidates look slower than they are, and as if they hid work."""
    ev, cand, _ = run(lambda x, i, block: reference(x), tmp_path)
    ops = [h["op"] for h in cand.headers]
    last_block = max(i for i, op in enumerate(ops) if op in ("time", "timed_outputs"))
    assert ops.index("profile") > last_block and ops[-1] == "<killed>" and ops.count("profile") == 1
    assert ev.out.fields["work"]["candidate_kernel_share"] is not None


def test_an_honest_candidate_passes_with_the_speedup_its_times_give(tmp_path: Any) -> None:
    ev, cand, ref = run(lambda x, i, block: reference(x), tmp_path)
    assert ev.out.verdict == Verdict.passed, ev.out.fields
    assert ev.out.fields["speedup"] == pytest.approx(0.2 / 0.05)
    assert ev.killed == [True]  # before the reference was timed
    timed = [h for h in cand.headers if h["op"] == "time"]
    assert len(timed) == 1 + len(referee_timing.BLOCK_LENGTHS) and all(h["prime"] for h in timed)
    picks = [h for h in cand.headers if h["op"] == "timed_outputs"]
    assert len(picks) == len(referee_timing.BLOCK_LENGTHS)
    assert all(len(h["indices"]) == referee_timing.CHECKED_PER_BLOCK for h in picks)
    # the estimate, then one fresh draw per candidate block, then the reference's own
    draws = [set(seeds) for seeds in ref.drawn]
    blocks = draws[1:1 + len(referee_timing.BLOCK_LENGTHS)]
    assert all(not (a & b) for i, a in enumerate(blocks) for b in blocks[i + 1:])
    assert ev.out.fields["timing"]["wall_per_call_ms"]["candidate"] is not None


def test_an_output_cache_filled_in_an_earlier_block_is_caught(tmp_path: Any) -> None:
    """It computes in the first candidate block, then answers each later call from the output it gave for
    the same call index: right if blocks were lent the same sets again, wrong on fresh ones."""
    memo: dict[int, torch.Tensor] = {}

    def model(x: torch.Tensor, i: int, block: int) -> torch.Tensor:
        if block > 2 and i in memo:  # block 1 is the estimate, block 2 the first candidate block
            return memo[i].clone()
        memo[i] = reference(x)
        return memo[i]

    ev, _, _ = run(model, tmp_path)
    assert ev.out.verdict == Verdict.rejected and ev.out.fields["rejected"]["check"] == "timed_output_mismatch"


def test_when_sets_repeat_in_a_block_the_referee_asks_for_two_calls_given_the_same_inputs(tmp_path: Any) -> None:
    """On a GPU their outputs come back as IPC handles, so one storage returned twice shows as one pointer
    (`_check_block`, tested in test_judge_timing_block.py); here the request itself is checked."""
    cand = FakeRunner(lambda x, i, block: reference(x), 0.05, "cand")
    ref = FakeRunner(lambda x, i, block: reference(x), 0.2, "ref")
    ev = fake_ev(cand, ref, tmp_path)
    ev.in_bytes = ev.out_bytes = referee_timing.BLOCK_MEMORY_BYTES // 4  # room for 2 sets: a block of 4 repeats
    ev.set_bytes = 2 * (ev.in_bytes + ev.out_bytes)
    time_and_check(ev)
    assert ev.out.verdict == Verdict.passed, ev.out.fields
    blocks = [h for h in cand.headers if h["op"] == "time"][1:]
    picks = [h["indices"] for h in cand.headers if h["op"] == "timed_outputs"]
    sets = len(FakeRunner._sets([h for h in cand.headers if h["op"] == "time_sets"][1]))
    for block, chosen in zip(blocks, picks):
        if block["calls"] > sets:
            assert any(i + sets in chosen for i in chosen), (block["calls"], sets, chosen)


@pytest.mark.parametrize("large", [False, True])
def test_sets_are_released_between_blocks_only_when_their_memory_is_needed(tmp_path: Any, large: bool) -> None:
    """Each release was a 5-8 ms round trip on the H200; a small task's sets are dropped by the next `make`
    or `time` instead, a large task's as soon as they are done with (its next block needs the memory)."""
    cand = FakeRunner(lambda x, i, block: reference(x), 0.05, "cand")
    ref = FakeRunner(lambda x, i, block: reference(x), 0.2, "ref")
    ev = fake_ev(cand, ref, tmp_path)
    if large:  # as the judge would count them: the fake runners' tensors stay small
        ev.in_bytes = ev.out_bytes = referee_timing.EARLY_RELEASE_BYTES // 2
        ev.set_bytes = 2 * (ev.in_bytes + ev.out_bytes)
    time_and_check(ev)
    assert ev.out.verdict == Verdict.passed, ev.out.fields
    cand_releases = sum(h["op"] == "release" for h in cand.headers)
    ref_releases = sum(h["op"] == "release" for h in ref.headers)
    blocks = len(referee_timing.BLOCK_LENGTHS)
    if large:
        assert cand_releases >= blocks + 1 and ref_releases >= 2 * blocks + 2
    else:
        assert cand_releases == 0 and ref_releases == 1  # the reference's one release, at the end


def test_the_candidate_holds_no_timed_input_set_before_its_wall_clock_starts(tmp_path: Any) -> None:
    """Code in the candidate's process could compute the outputs before it says "primed", off the wall
    clock, and copy them in the timed calls. It primes on a decoy the reference drew (the estimate's set,
    given to no timed call) and is lent the timed sets only after "primed"."""
    cand = FakeRunner(lambda x, i, block: reference(x), 0.05, "cand")
    ref = FakeRunner(lambda x, i, block: reference(x), 0.2, "ref")
    ev = fake_ev(cand, ref, tmp_path)
    time_and_check(ev)
    assert ev.out.verdict == Verdict.passed, ev.out.fields
    ops = [h["op"] for h in cand.headers]
    blocks = [i for i, op in enumerate(ops) if op == "time"]
    assert blocks and all(ops[i + 1] == "time_sets" for i in blocks)  # the sets follow "primed", never precede it
    timed = [x for h in cand.headers if h["op"] == "time_sets" for (x,) in FakeRunner._sets(h)]
    assert all(not torch.equal(d, x) for d in cand.primed_on[1:] for x in timed[len(cand.primed_on[0]):])
    assert all(torch.equal(d, cand.primed_on[0]) for d in cand.primed_on)  # one decoy for every block


def test_a_candidate_that_computes_while_priming_gains_nothing(tmp_path: Any) -> None:
    """It memoises whatever it is given while priming, then answers timed calls from the memo when the
    inputs match: it only ever saw the decoy, so every timed answer it gives from the memo is wrong."""
    memo: list[torch.Tensor] = []

    class Hoarder(FakeRunner):
        def op_time(self, req: dict, bufs: list) -> tuple[dict, list]:
            memo.extend(reference(s[0]) for s in self._sets(req["decoy"]))
            return super().op_time(req, bufs)

    cand = Hoarder(lambda x, i, block: memo[0] if memo else reference(x), 0.001, "cand")
    ev = fake_ev(cand, FakeRunner(lambda x, i, block: reference(x), 0.2, "ref"), tmp_path)
    time_and_check(ev)
    assert ev.out.verdict == Verdict.rejected and ev.out.fields["rejected"]["check"] == "timed_output_mismatch"


def test_the_reference_is_timed_afresh_three_times_then_every_fourth_evaluation(tmp_path: Any) -> None:
    timings: dict = {}
    ref = FakeRunner(lambda x, i, block: reference(x), 0.2, "ref")
    fresh = []
    for _ in range(8):
        cand = FakeRunner(lambda x, i, block: reference(x), 0.05, "cand")
        before = sum(h["op"] == "time" for h in ref.headers)
        ev = fake_ev(cand, ref, tmp_path, timings)
        time_and_check(ev)
        assert ev.out.verdict == Verdict.passed, ev.out.fields
        assert ev.out.fields["speedup"] == pytest.approx(0.2 / 0.05)
        reused = ev.out.fields["timing"]["reference_timed_s_ago"]
        fresh.append(reused is None)
        assert (sum(h["op"] == "time" for h in ref.headers) > before) == (reused is None)
        assert ("reused its timing" in ev.out.fields["timing"]["method"]) == (reused is not None)
    assert fresh == [True, True, True, False, False, False, True, False]


def test_a_reference_timing_is_not_reused_once_it_is_old(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from adaexplore_mcp.judge import reference_timings

    t = ReferenceTimings()
    for _ in range(3):
        t.add(reference_timings.ReferenceTiming(strict=[([0.1], 1.0, 1)], tf32=[([0.1], 1.0, 1)],
                                                compiled={"blocks": [([0.1], 1.0, 1)]}, at=100.0))
    assert t.reusable(True, now=100.0 + reference_timings.REUSE_S - 1) is not None
    assert t.reusable(True, now=100.0 + reference_timings.REUSE_S + 1) is None
    assert t.reusable(False, now=101.0) is None  # the compiled yardstick still to be measured: time afresh
