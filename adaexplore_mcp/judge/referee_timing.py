"""Timing a candidate so that nothing inside its process can forge the speedup.

The candidate's runner times its own calls with CUDA events, and that is the precise number we
report; but events live in the candidate's process, where they can be patched. So the referee
also holds each timed block to its own wall clock (from the runner's "primed" until the outputs it
picked are mapped and the device synchronized), and calibrates that clock on the reference run through the very
same protocol. A candidate whose events claim less time than its wall clock allows (a side stream,
patched events, work deferred past its reply) is timed by the wall clock (`hidden_work.py`).

Further rules:
- each block's calls run once untimed first, on a decoy set the reference drew (the allocator then holds
  every kept output's memory), and the timed sets are lent only once the runner says "primed" and the
  wall clock runs: nothing computed before can answer a timed call;
- fresh input sets for every candidate block, and fresh inputs per timed call where memory allows (so
  a cache keyed on inputs never hits); every call's output kept, and after the block the referee picks
  4 (a pair on the same inputs when sets repeat) to check against the reference's outputs for them,
  computed from the reference's own copies of those inputs (the candidate is lent the referee's), and
  rejects a storage returned for two calls;
- the candidate's process is killed before the reference is timed, so no work it leaves behind
  (a thread launching kernels) can slow the reference down and inflate its speedup;
- everything under the per-GPU lock, so two evaluations never time on one GPU at once;
- the reference timed afresh on a task's first evaluations, then every 4th (`reference_timings.py`).

Two more yardsticks than the eager reference, the compiled reference and the roofline, are measured
after it (`referee_baselines.py`) and recorded with it here; the timing's numbers go in `ev.timed`, where the
pipeline's next check (checks/roofline.py) holds the candidate to its roofline and sets the speedups.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from . import wire
from .compare import as_tensors, compare
from .checks.roofline import Timed
from .referee import ReferenceFailure
from .hidden_work import block_summary, hidden_per_call, outside_per_pair, samples, wall_per_call
from .reference_timings import REUSE_S, ReferenceTiming, ReferenceTimings
from .referee_baselines import COMPILE_MODE, compile_and_time, compile_ready, compile_settled, compiled_median
from .referee_baselines import hardware_context, release_quietly, time_compiled
from .timing import METHOD, gpu_lock, plan_reps, summarize

if TYPE_CHECKING:
    from .checks.context import Judging

BLOCK_MEMORY_BYTES = 8 << 30  # inputs and kept outputs of one timed block
BLOCK_LENGTHS = (1, 2, 1, 2)  # blocks of n and 2n calls: the wall clock's slope cancels fixed costs
CHECKED_PER_BLOCK = 4
# A block's sets and outputs at least this large are released as soon as they are done with. Below it the runners
# drop a key's old sets and timed outputs before they allocate the next ones, so a release only adds a round trip
# (and a cudaMalloc after it): at 1 and 4 GiB, L2 tasks (blocks of 4-6 GiB) still paid 16 releases of 5-8 ms each
# on the H200 (runs i, 2026-12-04-a). 6 GiB tasks (blocks of 36 GiB) need theirs: what the candidate kept would
# otherwise sit beside the next block's sets. Blocks are at most 16 GiB below it (BLOCK_MEMORY_BYTES twice).
EARLY_RELEASE_BYTES = 12 << 30


def profile_share(ev: Judging) -> dict[str, Any] | None:
    """Share of device time in the candidate's own kernels during one call (evidence from its process)."""
    (inputs, _), = ev.make_inputs([random.getrandbits(62)], "profile")
    lent = wire.pack(list(inputs))
    del inputs
    buffers: list[Any] = []
    try:
        reply, _ = ev.cand_call({"op": "profile", "inputs": wire.encode_value(lent, buffers, pack=False)}, buffers)
    finally:
        if ev.set_bytes >= EARLY_RELEASE_BYTES:  # else: the candidate is killed next, the reference lets go at the end
            ev.release()
    named = [(str(k)[:120], wire.finite_number(v)) for k, v in reply.get("kernels", [])]
    kernels = [(k, v) for k, v in named if v is not None]
    total = sum(v for _, v in kernels)
    if total <= 0:
        return None
    own = sum(v for k, v in kernels if any(name in k for name in ev.out.kernels))
    share = own / total
    others = [[k, round(v / total, 3)] for k, v in kernels if not any(name in k for name in ev.out.kernels)][:5]
    if share < 0.1:
        ev.out.warnings.append(f"only {share:.0%} of the device time was spent in the candidate's own Triton "
                               "kernels; the rest in library kernels (see `work`)")
    return {"candidate_kernel_share": round(share, 3), "other_kernels": others,
            "note": "measured by torch.profiler inside the candidate's process"}


def _block(call: Any, header: dict, sets: list[list[Any]], lend: Callable[[list], dict[str, Any]],
           pick: Callable[[int], list[int]] | None = None) -> tuple[list[float], float, list]:
    """One timed block: (per-call event ms as reported, referee wall ms, outputs).

    The request names the calls and lends a decoy set (drawn by the reference, given to no timed call):
    the runner runs the block's calls on it untimed (its allocator then holds every kept output's memory,
    so no cudaMalloc lands inside a timed call) and says "primed". The wall clock starts there, and only
    then are the timed sets lent: nothing the runner computed before could answer a timed call, and
    mapping the sets counts (the same in every block, so it cancels in the slope). It answers with its
    times alone and keeps every output. With `pick`, the referee then chooses which outputs it maps
    (`pick(calls)` -> indices, after the block: the runner cannot know them in advance) and waits for the
    device, all on the wall clock: work still pending behind them counts. Fetching a handful of outputs
    costs the same in every block, so it cancels in the slope (`wall_per_call`); mapping all of them did
    not, and made honest candidates look as if they hid 0.03-0.08 ms per call.
    Returns `[(index, output), ...]` as outputs with `pick`, `[]` without, `[reply]` on a failure."""
    reply, _ = call({"op": "time", "prime": True, **header}, [])
    if reply.get("primed") is not True:
        return [], 0.0, [reply if any(k in reply for k in ("verdict", "ref_error", "internal")) else
                         {"internal": "the runner did not say 'primed' before its timed calls"}]
    t0 = time.perf_counter()
    reply, _ = call({"op": "time_sets", **lend(sets)}, [])
    if "verdict" in reply or "ref_error" in reply or "times_ms" not in reply:
        return [], 0.0, [reply]
    times = [t for t in map(wire.finite_number, reply["times_ms"]) if t is not None]  # fewer than calls: rejected
    if pick is None:
        return times, (time.perf_counter() - t0) * 1e3, []
    indices = pick(int(header["calls"]))
    got, bufs = call({"op": "timed_outputs", "indices": indices}, [])
    if not isinstance(got.get("outputs"), list) or len(got["outputs"]) != len(indices):
        return [], 0.0, [got if "verdict" in got or "internal" in got else
                         {"internal": "the runner did not return the timed outputs asked for"}]
    opened: dict = {}
    outs = [wire.decode_value(o, bufs, opened=opened) for o in got["outputs"]]
    torch.cuda.synchronize()  # mapping made this process wait on the outputs' IPC events
    # Nothing between "primed" and here is left out: work the runner deferred past its answer still counts.
    # The picks cost the same in every block (not per call), so they cancel in the slope.
    return times, (time.perf_counter() - t0) * 1e3, list(zip(indices, outs))


def pick_checked(calls: int, sets: int, checked: int = 4) -> list[int]:
    """Which timed calls' outputs the referee checks: `checked` at random, and when the calls cycle over
    fewer input sets than there are calls, one pair given the same inputs (an output cache keyed on the
    inputs would return one storage for both). Pure but for the random draw."""
    checked = min(checked, calls)
    chosen: list[int] = []
    if sets < calls and checked >= 2:
        first = random.randrange(calls - sets)
        chosen = [first, first + sets]
    rest = [i for i in range(calls) if i not in chosen]
    chosen += random.sample(rest, checked - len(chosen))
    random.shuffle(chosen)
    return chosen


class _Sides:
    """The two ends of a timed block: the candidate's runner and the reference's, called alike."""

    def __init__(self, ev: Judging) -> None:
        self.ev = ev
        self.block_bytes = ev.set_bytes  # device memory one block's sets and outputs take (set once planned)
        self.decoy: list[Any] | None = None  # the set every block primes on (drawn by the estimate)

    def cand(self, header: dict, buffers: list) -> tuple[dict, list]:
        return self.ev.cand_call(header, buffers, max_reply=64 << 20)

    def ref(self, header: dict, buffers: list) -> tuple[dict, list]:
        return self.ev.referee.call_ref(self.ev.ref, header, self.ev.deadline, "timing the reference", buffers)

    def outputs_for(self, key: str, indices: list[int]) -> dict[int, Any]:
        """The reference's outputs for some of the sets it drew under `key`, by set index: computed only
        for the outputs the referee picked to check (4 per block, not one per set: 60-130 forwards fewer per
        block), after the block, from the reference's own copies of the inputs."""
        reply, bufs = self.ev.referee.call_ref(self.ev.ref, {"op": "outputs", "key": key, "indices": indices},
                                               self.ev.deadline, "running the reference")
        opened: dict = {}
        return {int(i): wire.decode_value(o, bufs, opened=opened) for i, o in zip(reply["indices"], reply["outputs"])}

    @staticmethod
    def lend(sets: list[list[Any]]) -> dict[str, Any]:
        buffers: list[Any] = []
        return {"sets": wire.encode_value(sets, buffers, pack=False)}

    def block(self, side: str, sets: list[list[Any]], calls: int, pick: bool = False,
              **extra: Any) -> tuple[list[float], float, list]:
        """One timed block of `side` ("cand" or "ref") on `sets`, primed on the decoy (see `_block`)."""
        decoy = self.decoy if self.decoy is not None or side == "cand" else sets[0]  # the reference is trusted
        assert decoy is not None, "the estimate draws the decoy before any candidate block"
        header = {"calls": calls, "decoy": self.lend([decoy]), **extra}
        chooser = (lambda n: pick_checked(n, len(sets), CHECKED_PER_BLOCK)) if pick else None
        return _block(self.cand if side == "cand" else self.ref, header, sets, self.lend, chooser)

    def release_ref(self, only: str | None = None) -> None:
        self.ev.referee.call_ref(self.ev.ref, {"op": "release", "only": only, "keep_cache": self.ev.keep_cache},
                                 self.ev.deadline, "releasing the reference")

    def release_early(self, only: str | None = None, cand: bool = False, ref: bool = True) -> None:
        """Release between blocks only when a block's sets and outputs are large (the next block needs their
        memory). Otherwise the runners drop them when the next `make` or `time` replaces them: on the H200
        each release was a 5-8 ms round trip, 15-19 of them per evaluation."""
        if self.block_bytes < EARLY_RELEASE_BYTES:
            return
        if cand:
            self.ev.cand_call({"op": "release", "keep_cache": self.ev.keep_cache})
        if ref:
            self.release_ref(only)

    def inputs_only(self, seeds: list[int], key: str) -> list[list[Any]]:
        """Input sets drawn by the reference, without its outputs, copied into the referee's memory: the copies
        are what both sides are lent (so both pay the same cost to map them inside their timed blocks), and
        the reference keeps its own until its next draw under `key` (for `outputs_for`)."""
        reply, bufs = self.ev.referee.call_ref(self.ev.ref, {"op": "make", "seeds": seeds, "key": key,
                                                             "outputs": False}, self.ev.deadline, "drawing inputs")
        opened: dict = {}
        sets = wire.pack([list(wire.decode_value(s["inputs"], bufs, opened=opened)) for s in reply["sets"]])
        torch.cuda.synchronize()
        return sets

    def time_ref(self, sets: list[list[Any]], calls: int, **extra: Any) -> tuple[list[float], float, list]:
        """One timed block of the reference's runner, its events only (the TF32 and compiled yardsticks)."""
        return self.block("ref", sets, calls, **extra)


def time_candidate(ev: Judging) -> None:
    out, limits, referee = ev.out, ev.limits, ev.referee
    sides = _Sides(ev)
    in_bytes, out_bytes = ev.in_bytes, max(1, ev.out_bytes)
    timings = referee.ref_timings(ev.ref.key)
    referee.wait_spares(ev.deadline)  # a spare creating its CUDA context while we time would add noise
    ev.mark("wait_spares")
    with gpu_lock(referee.home, referee.physical_index or 0):
        ev.mark("lock_wait")  # other evaluations timing on this GPU (bench/parallel_steps.py reads it)
        reuse = timings.reusable(compile_settled(ev, timings))
        est = _estimate(ev, sides, reuse)
        if out.done:
            return
        _, reps = plan_reps(est, limits)
        calls = max(2, min(reps // sum(BLOCK_LENGTHS) + 1, BLOCK_MEMORY_BYTES // (max(BLOCK_LENGTHS) * out_bytes)))
        sets_count = max(1, min(max(BLOCK_LENGTHS) * calls, BLOCK_MEMORY_BYTES // max(1, in_bytes + out_bytes)))
        sides.block_bytes = sets_count * (in_bytes + out_bytes) + max(BLOCK_LENGTHS) * calls * out_bytes
        _warm_clocks()
        cand_blocks = []
        for length in BLOCK_LENGTHS:
            n = length * calls
            # Fresh input sets for every block: an output cache filled in an earlier block (keyed on pointers
            # or on values) never answers a timed call of this one.
            sets = sides.inputs_only([random.getrandbits(62) for _ in range(sets_count)], "timing")
            times, wall, outs = sides.block("cand", sets, n, pick=True)
            if not times:
                out.error(outs[0] if outs else {})
                return
            expected = sides.outputs_for("timing", sorted({i % len(sets) for i, _ in outs}))
            if not _check_block(ev, outs, expected, len(sets), n, len(times)):
                return
            del outs, expected, sets
            sides.release_early(cand=True)
            cand_blocks.append((times, wall, n))
        # Profiled only now, after its timed blocks: torch.profiler leaves CUPTI attached to the process,
        # and every later launch pays for it (see bench/README.md, "profiler residue").
        ev.mark("timing_candidate")
        out.fields["work"] = {**(out.fields.get("work") or {}), **(profile_share(ev) or {})} or None  # beside the replay's
        ev.mark("profile")
        ev.cand.retire()  # nothing it left running may slow the reference down
        hardware = hardware_context(ev)  # under the lock: an unknown GPU's bandwidth is measured once, here
        fresh = None if reuse is not None else _time_reference(ev, sides, calls, sets_count)
        sides.decoy = None
    ev.mark("timing_reference")
    if fresh is not None:
        if "blocks" not in fresh.compiled and "unavailable" not in fresh.compiled:
            compile_and_time(ev, sides, [random.getrandbits(62) for _ in range(sets_count)], calls, fresh.compiled)
        timings.add(fresh)
    else:
        timings.reused()
    _record(ev, cand_blocks, timings, fresh or reuse, calls, sets_count, hardware, fresh is None)


def _time_reference(ev: Judging, sides: _Sides, calls: int, sets_count: int) -> ReferenceTiming:
    """The reference timed afresh, through the candidate's protocol (its strict blocks map 4 picked outputs
    too, so a block costs both sides the same once), then its TF32 and compiled yardsticks (events only)."""
    sets = sides.inputs_only([random.getrandbits(62) for _ in range(sets_count)], "timing")
    sides.release_early()
    strict, tf32 = [], []
    for mode, length in [("strict", length) for length in BLOCK_LENGTHS] + [("tf32", 2)]:
        n = length * calls
        times, wall, outs = sides.block("ref", sets, n, pick=mode == "strict", mode=mode)
        if not times:
            raise ReferenceFailure(f"timing the reference failed: {str(outs[0] if outs else '')[:300]}")
        del outs
        sides.release_early("timed")
        (strict if mode == "strict" else tf32).append((times, wall, n))
    compiled: dict[str, Any] = {}
    if compile_ready(ev, compiled):
        compiled["blocks"] = time_compiled(ev, sides, sets, calls, compiled)
    del sets
    release_quietly(sides)
    return ReferenceTiming(strict=strict, tf32=tf32, compiled=compiled)


def _warm_clocks() -> None:
    """~30 ms of matrix work in the referee first: a GPU that idled between evaluations runs its first
    timed block at lower clocks, which would tilt the candidate/reference ratio."""
    a = torch.randn(4096, 4096, device="cuda")
    for _ in range(10):
        a = torch.tanh(a @ a)
    torch.cuda.synchronize()


def _estimate(ev: Judging, sides: _Sides, reuse: ReferenceTiming | None) -> float:
    """Milliseconds of one candidate + references round, from a short block of the candidate (untimed) and
    one of the reference (or the timing it reuses). Its input set stays as the decoy every block primes on:
    the candidate has seen it, but no timed call is given it."""
    sides.decoy = decoy = sides.inputs_only([random.getrandbits(62)], "estimate")[0]
    sides.release_early()
    times_c, _, outs = sides.block("cand", [decoy], 3)
    if not times_c:
        ev.out.error(outs[0] if outs else {})
        return 0.0
    del outs
    sides.release_early(cand=True, ref=False)
    if reuse is not None:
        return statistics.median(times_c) + 2 * ReferenceTiming.median(reuse.strict)
    times_r, _, outs = sides.block("ref", [decoy], 3)
    del outs
    sides.release_early("timed")
    return statistics.median(times_c) + 2 * (statistics.median(times_r) if times_r else 0.0)


def _check_block(ev: Judging, outs: list[tuple[int, Any]], expected: dict[int, Any], sets: int, calls: int,
                 timed: int) -> bool:
    """The outputs the referee picked must match the reference's for their input sets (`expected`, by set
    index; call i was given set i % sets), and no storage may be returned for two calls."""
    out, limits = ev.out, ev.limits
    if timed != calls:
        out.reject("timed_output_mismatch", f"the timed block reported {timed} times for {calls} calls")
        return False
    ptrs = [t.data_ptr() for _, o in outs for t in as_tensors(o) if isinstance(t, torch.Tensor) and t.numel()]
    if len(set(ptrs)) != len(ptrs):
        out.reject("output_reused_across_calls", "two timed calls returned the same output storage: each call must "
                   "compute a new result (an output cache keyed on the inputs is not a kernel)")
        return False
    atol, rtol = ev.tol
    for i, got in outs:
        mismatch = compare(expected[i % sets], got, i, atol, rtol, limits.max_rel_norm)
        if mismatch is not None:
            out.reject("timed_output_mismatch", f"the output of timed call {i} differs from the reference "
                       f"(reason {mismatch['reason']}, max abs error {mismatch.get('max_abs_error')})")
            return False
    return True


def _record(ev: Judging, cand_blocks: list, timings: ReferenceTimings, used: ReferenceTiming, calls: int, sets: int,
            hardware: dict[str, Any], reused: bool) -> None:
    out = ev.out
    cand_t, ref_t, tf32_t = (summarize(samples(b)) for b in (cand_blocks, used.strict, used.tf32))
    ref_ms, tf32_ms = timings.speedup_bases()
    age = round(time.monotonic() - used.at, 1) if reused else None
    method = (METHOD.format(reps=cand_t.reps) + f"; {sets} distinct input set(s), blocks of {calls} calls held to "
              f"the judge's own wall clock; speedups divide by the median of the last {len(timings.medians)} "
              "reference medians; the reference is timed afresh on a task's first 3 evaluations, then every 4th "
              f"and after {REUSE_S:.0f} s, " + (f"and this evaluation reused its timing of {age} s ago" if reused
                                                  else "and was timed afresh for this evaluation") +
              f"; the compiled reference is torch.compile(mode={COMPILE_MODE!r}) of the same Model, compiled once "
              "per reference process, timed in blocks like the TF32 one (its events only)")
    compiled = used.compiled
    timing: dict[str, Any] = {"candidate": cand_t.model_dump(), "reference": ref_t.model_dump(),
                              "reference_tf32": tf32_t.model_dump(), "method": method, "gpu": ev.referee.gpu_name,
                              "compile_mode": COMPILE_MODE, "compile_s": None if reused else compiled.get("compile_s"),
                              "compile_unavailable": compiled.get("unavailable"), "reference_timed_s_ago": age}
    out.fields["timing"] = timing
    compiled_ms = compiled_median(ev, compiled, timing, fresh=not reused)
    cand_ms = cand_t.median_ms
    records = timings.strict_records()
    hidden = hidden_per_call(cand_blocks, records)
    timing["wall_per_call_ms"] = {"candidate": round(wall_per_call(cand_blocks), 5),
                                  "reference": round(wall_per_call(used.strict), 5)}
    timing["outside_per_call_ms"] = {"candidate": [round(x, 5) for x in outside_per_pair(cand_blocks)],
                                     "reference": [round(x, 5) for r in records for x in outside_per_pair(r)]}
    timing["blocks"] = {"candidate": block_summary(cand_blocks), "reference": block_summary(used.strict)}
    if hidden is not None:
        cand_ms = cand_t.median_ms + hidden
        out.warnings.append(f"the candidate's own CUDA events missed about {hidden:.3f} ms per call (a side stream, "
                            f"patched events, deferred work?); speedups use the judge's wall clock ({cand_ms:.3f} ms)")
    timing["clocks"] = hardware.get("clocks")
    ev.timed = Timed(timing, hardware, cand_ms, ref_ms, tf32_ms, compiled_ms, [ref_t.median_ms, tf32_t.median_ms] +
                     ([timing["reference_compiled"]["median_ms"]] if timing.get("reference_compiled") else []))


__all__ = ["profile_share", "time_candidate"]
