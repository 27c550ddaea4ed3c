"""Timing a candidate so that nothing inside its process can forge the speedup.

The candidate's runner times its own calls with CUDA events, and that is the precise number we
report; but events live in the candidate's process, where they can be patched. So the referee
also holds each timed block to its own wall clock (from the runner's "primed" until the outputs it
picked are mapped and the device synchronized), and calibrates that clock on the reference run through the very
same protocol. A candidate whose events claim less time than its wall clock allows (a side stream,
patched events, work deferred past its reply) is timed by the wall clock.

Further rules:
- each block's calls run once untimed first, on zeros (the allocator then holds every kept output's
  memory; an output cache filled there answers no timed call);
- fresh input sets for every candidate block, and fresh inputs per timed call where memory allows (so
  a cache keyed on inputs never hits); every call's output kept, and after the block the referee picks
  4 (a pair on the same inputs when sets repeat) to check against the reference's outputs for them,
  computed from the reference's own copies of those inputs (the candidate is lent the referee's), and
  rejects a storage returned for two calls;
- the candidate's process is killed before the reference is timed, so no work it leaves behind
  (a thread launching kernels) can slow the reference down and inflate its speedup;
- everything under the per-GPU lock, so two evaluations never time on one GPU at once.

Two more yardsticks than the eager reference, the compiled reference and the roofline, are measured
after it (`referee_baselines.py`) and recorded with it here.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from . import wire
from .compare import as_tensors, compare
from .referee import ReferenceFailure
from .referee_baselines import COMPILE_MODE, compile_and_time, compile_ready, compiled_median, hardware_context
from .referee_baselines import release_quietly, roofline_of, time_compiled
from .timing import METHOD, gpu_lock, plan_reps, summarize

BLOCK_MEMORY_BYTES = 8 << 30  # inputs and kept outputs of one timed block
BLOCK_LENGTHS = (1, 2, 1, 2)  # blocks of n and 2n calls: the wall clock's slope cancels fixed costs
# Work the events may miss per call before the wall clock is believed instead. Honest candidates on the H200 showed
# up to 0.023 ms (run i: 2 of 3 scale_bias_gelu runs were charged at 0.02, their speedup 3.65x read 2.75x); the timing
# attacks of the red-team corpus hide 0.13-0.15 ms per call.
HIDDEN_ABS_MS = 0.04
HIDDEN_REL = 0.2
CHECKED_PER_BLOCK = 4
# A block's sets and outputs at least this large are released as soon as they are done with. Below it the runners
# drop a key's old sets and timed outputs before they allocate the next ones, so a release only adds a round trip
# (and a cudaMalloc after it): at 1 and 4 GiB, L2 tasks (blocks of 4-6 GiB) still paid 16 releases of 5-8 ms each
# on the H200 (runs i, 2026-12-04-a). 6 GiB tasks (blocks of 36 GiB) need theirs: what the candidate kept would
# otherwise sit beside the next block's sets. Blocks are at most 16 GiB below it (BLOCK_MEMORY_BYTES twice).
EARLY_RELEASE_BYTES = 12 << 30


def profile_share(ev: Any) -> dict[str, Any] | None:
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
    kernels = [(str(k)[:120], float(v)) for k, v in reply.get("kernels", []) if isinstance(v, (int, float))]
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


def _block(call: Any, more: Any, header: dict, buffers: list,
           pick: Callable[[int], list[int]] | None = None) -> tuple[list[float], float, list]:
    """One timed block: (per-call event ms as reported, referee wall ms, outputs).

    The runner first runs the block's calls untimed (its allocator then holds every kept output's memory,
    so no cudaMalloc lands inside a timed call) and says "primed"; the wall clock starts there (a runner
    that never says it is timed from the request, which can only make it slower). It answers with its
    times alone and keeps every output. With `pick`, the referee then chooses which outputs it checks
    (`pick(calls)` -> indices, after the block: the runner cannot know them in advance), maps those and
    waits for the device, all on the wall clock: work still pending behind them counts. Fetching a
    handful of outputs costs the same in every block, so it cancels in the slope (`wall_per_call`);
    mapping all of them did not, and made honest candidates look as if they hid 0.03-0.08 ms per call.
    Returns `[(index, output), ...]` as outputs with `pick`, `[]` without, `[reply]` on a failure."""
    t0 = time.perf_counter()
    reply, _ = call({"op": "time", "warmup": 1, "prime": True, **header}, buffers)
    if reply.get("primed") is True:
        t0 = time.perf_counter()
        reply, _ = more()
    if "verdict" in reply or "ref_error" in reply or "times_ms" not in reply:
        return [], 0.0, [reply]
    times = [float(x) for x in reply["times_ms"] if isinstance(x, (int, float))]
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

    def __init__(self, ev: Any) -> None:
        self.ev = ev
        self.block_bytes = ev.set_bytes  # device memory one block's sets and outputs take (set once planned)

    def cand(self, header: dict, buffers: list) -> tuple[dict, list]:
        return self.ev.cand_call(header, buffers, max_reply=64 << 20)

    def cand_more(self) -> tuple[dict, list]:
        """The candidate's next message for the same request (after "primed")."""
        return self.ev.cand.receive(self.ev.deadline, 64 << 20)

    def ref(self, header: dict, buffers: list) -> tuple[dict, list]:
        return self.ev.referee.call_ref(self.ev.ref, header, self.ev.deadline, "timing the reference", buffers)

    def ref_more(self) -> tuple[dict, list]:
        return self.ev.referee.receive_ref(self.ev.ref, self.ev.deadline, "timing the reference")

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

    def release_ref(self, only: str | None = None) -> None:
        self.ev.referee.call_ref(self.ev.ref, {"op": "release", "only": only}, self.ev.deadline,
                                 "releasing the reference")

    def release_early(self, only: str | None = None, cand: bool = False, ref: bool = True) -> None:
        """Release between blocks only when a block's sets and outputs are large (the next block needs their
        memory). Otherwise the runners drop them when the next `make` or `time` replaces them: on the H200
        each release was a 5-8 ms round trip, 15-19 of them per evaluation."""
        if self.block_bytes < EARLY_RELEASE_BYTES:
            return
        if cand:
            self.ev.cand_call({"op": "release"})
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

    def time_ref(self, header: dict) -> tuple[list[float], float, list]:
        """One timed block of the reference's runner (see `_block`)."""
        return _block(self.ref, self.ref_more, header, [])


def time_candidate(ev: Any) -> None:
    out, limits, referee = ev.out, ev.limits, ev.referee
    sides = _Sides(ev)
    in_bytes, out_bytes = ev.in_bytes, max(1, ev.out_bytes)
    referee.wait_spares(ev.deadline)  # a spare creating its CUDA context while we time would add noise
    ev.mark("wait_spares")
    with gpu_lock(referee.home, referee.physical_index or 0):
        ev.mark("lock_wait")  # other evaluations timing on this GPU (bench/parallel_steps.py reads it)
        est = _estimate(ev, sides)
        if out.done:
            return
        _, reps = plan_reps(est, limits)
        calls = max(2, min(reps // sum(BLOCK_LENGTHS) + 1, BLOCK_MEMORY_BYTES // (max(BLOCK_LENGTHS) * out_bytes)))
        sets_count = max(1, min(max(BLOCK_LENGTHS) * calls, BLOCK_MEMORY_BYTES // max(1, in_bytes + out_bytes)))
        seeds = [random.getrandbits(62) for _ in range(sets_count)]  # the reference's sets, below
        sides.block_bytes = sets_count * (in_bytes + out_bytes) + max(BLOCK_LENGTHS) * calls * out_bytes
        _warm_clocks()
        cand_blocks = []
        for length in BLOCK_LENGTHS:
            n = length * calls
            # Fresh input sets for every block: an output cache filled in an earlier block (keyed on pointers
            # or on values) never answers a timed call of this one.
            sets = sides.inputs_only([random.getrandbits(62) for _ in range(sets_count)], "timing")
            times, wall, outs = _block(sides.cand, sides.cand_more, {**sides.lend(sets), "calls": n}, [],
                                       pick=lambda calls: pick_checked(calls, len(sets), CHECKED_PER_BLOCK))
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
        out.fields["work"] = profile_share(ev)
        ev.mark("profile")
        ev.cand.kill()  # nothing it left running may slow the reference down
        sets = sides.inputs_only(seeds, "timing")  # the reference's own draw (no outputs: nothing is compared)
        sides.release_early()
        ref_blocks: dict[str, list] = {"strict": [], "tf32": []}
        plan = [("strict", length) for length in BLOCK_LENGTHS] + [("tf32", 2)]  # TF32: its events only
        for mode, length in plan:
            n = length * calls
            times, wall, outs = _block(sides.ref, sides.ref_more, {**sides.lend(sets), "calls": n, "mode": mode}, [])
            if not times:
                raise ReferenceFailure(f"timing the reference failed: {str(outs[0] if outs else '')[:300]}")
            del outs
            sides.release_early("timed")
            ref_blocks[mode].append((times, wall, n))
        hardware = hardware_context(ev)  # under the lock: an unknown GPU's bandwidth is measured once, here
        compiled: dict[str, Any] = {}
        if compile_ready(ev, compiled):
            compiled["blocks"] = time_compiled(ev, sides, sets, calls, compiled)
        del sets
        release_quietly(sides)
    ev.mark("timing_reference")
    if "blocks" not in compiled and "unavailable" not in compiled:
        compile_and_time(ev, sides, seeds, calls, compiled)
    _record(ev, cand_blocks, ref_blocks, calls, len(seeds), compiled, hardware)


def _warm_clocks() -> None:
    """~30 ms of matrix work in the referee first: a GPU that idled between evaluations runs its first
    timed block at lower clocks, which would tilt the candidate/reference ratio."""
    a = torch.randn(4096, 4096, device="cuda")
    for _ in range(10):
        a = torch.tanh(a @ a)
    torch.cuda.synchronize()


def _estimate(ev: Any, sides: _Sides) -> float:
    """Milliseconds of one candidate + references round, from a short block of each (untimed)."""
    sets = sides.inputs_only([random.getrandbits(62)], "estimate")
    sides.release_early()
    times_c, _, outs = _block(sides.cand, sides.cand_more, {**sides.lend(sets), "calls": 3}, [])
    if not times_c:
        ev.out.error(outs[0] if outs else {})
        return 0.0
    del outs
    sides.release_early(cand=True, ref=False)
    times_r, _, outs = _block(sides.ref, sides.ref_more, {**sides.lend(sets), "calls": 3}, [])
    del outs
    sides.release_early("timed")
    return statistics.median(times_c) + 2 * (statistics.median(times_r) if times_r else 0.0)


def _check_block(ev: Any, outs: list[tuple[int, Any]], expected: dict[int, Any], sets: int, calls: int,
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


def _samples(blocks: list[tuple[list[float], float, int]]) -> list[float]:
    return [t for times, _, _ in blocks for t in times]


def wall_per_call(blocks: list[tuple[list[float], float, int]]) -> float:
    """Milliseconds per call from blocks of different lengths: the slope of wall time against the number
    of calls, so what a block costs once (the request, mapping the lent inputs, the reply, mapping the
    outputs) cancels out. Reported, not judged on (one stalled block can tilt it, see `outside_per_pair`).
    Pure."""
    xs = [float(calls) for _, _, calls in blocks]
    ys = [float(wall) for _, wall, _ in blocks]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    if var == 0:
        return my / max(mx, 1.0)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var


def outside_per_pair(blocks: list[tuple[list[float], float, int]]) -> list[float]:
    """Per call, what the wall clock saw outside the events, once for each pair of consecutive blocks
    of different lengths (`BLOCK_LENGTHS` makes pairs of n and 2n calls). Pure.

    A block's excess is its wall time less the sum of its calls' events; the difference between a pair's
    excesses over the difference of their calls cancels what a block costs once. One pair per estimate,
    not one slope over all blocks: on the H200 a single stalled reference block (the first after the
    candidate's process is killed) made the all-block slope negative in 5 of 9 honest runs, which zeroed
    the allowance and charged honest candidates 0.03-0.09 ms per call."""
    values = []
    for (t_a, w_a, n_a), (t_b, w_b, n_b) in zip(blocks[0::2], blocks[1::2]):
        if n_a != n_b:
            values.append(((w_b - sum(t_b)) - (w_a - sum(t_a))) / (n_b - n_a))
    return values


def hidden_per_call(cand_blocks: list[tuple[list[float], float, int]],
                    ref_blocks: list[tuple[list[float], float, int]]) -> float | None:
    """Milliseconds per call the candidate's own events missed, or None. Pure.

    Per call, the judge's wall clock exceeds the events by what every call costs outside them (the L2
    flush, launches); the reference, timed through the same protocol, says how much that is. A candidate
    whose wall clock exceeds its events by more than that hid work from them (a side stream, patched
    events, deferred work). Noise only ever helps the candidate: it is accused only when every one of its
    pairs shows the excess (their minimum) over the most generous of the reference's pairs (their
    maximum, never below 0), by more than `HIDDEN_ABS_MS` and `HIDDEN_REL` of its events. Work hidden in
    every call shows in every pair, so the attacks stay caught.

    Once accused, the charge is measured against the reference's least generous pair above 0 (a pair at or
    below 0 is a stalled block, not a cost): on the H200 the most generous one still credited a candidate
    with patched events 0.03 ms per call it had not earned, and its speedup read 4.03x against the honest
    kernel's 2.98x."""
    cand, ref = outside_per_pair(cand_blocks), outside_per_pair(ref_blocks)
    if not cand:
        return None
    ev_c = statistics.median(_samples(cand_blocks))
    if min(cand) - max([0.0, *ref]) <= max(HIDDEN_ABS_MS, HIDDEN_REL * ev_c):
        return None
    return min(cand) - min([r for r in ref if r > 0], default=0.0)


def block_summary(blocks: list[tuple[list[float], float, int]]) -> list[list[float]]:
    """[calls, wall ms, sum of event ms] per block: the evidence behind a wall-clock verdict. Pure."""
    return [[calls, round(wall, 3), round(sum(times), 3)] for times, wall, calls in blocks]


def _record(ev: Any, cand_blocks: list, ref_blocks: dict, calls: int, sets: int, compiled: dict[str, Any],
            hardware: dict[str, Any]) -> None:
    out, limits = ev.out, ev.limits
    cand_t, ref_t, tf32_t = (summarize(_samples(b)) for b in (cand_blocks, ref_blocks["strict"], ref_blocks["tf32"]))
    history = ev.referee.ref_history(ev.ref.key)
    history.append((ref_t.median_ms, tf32_t.median_ms))
    ref_ms = statistics.median(h[0] for h in history)
    tf32_ms = statistics.median(h[1] for h in history)
    method = (METHOD.format(reps=cand_t.reps) + f"; {sets} distinct input set(s), blocks of {calls} calls held to "
              f"the judge's own wall clock; speedups divide by the median of the last {len(history)} reference medians"
              f"; the compiled reference is torch.compile(mode={COMPILE_MODE!r}) of the same Model, compiled once "
              "per reference process, timed in blocks like the TF32 one (its events only)")
    timing: dict[str, Any] = {"candidate": cand_t.model_dump(), "reference": ref_t.model_dump(),
                              "reference_tf32": tf32_t.model_dump(), "method": method, "gpu": ev.referee.gpu_name,
                              "compile_mode": COMPILE_MODE, "compile_s": compiled.get("compile_s"),
                              "compile_unavailable": compiled.get("unavailable")}
    out.fields["timing"] = timing
    compiled_ms = compiled_median(ev, compiled, timing)
    cand_ms = cand_t.median_ms
    hidden = hidden_per_call(cand_blocks, ref_blocks["strict"])
    timing["wall_per_call_ms"] = {"candidate": round(wall_per_call(cand_blocks), 5),
                                  "reference": round(wall_per_call(ref_blocks["strict"]), 5)}
    timing["outside_per_call_ms"] = {"candidate": [round(x, 5) for x in outside_per_pair(cand_blocks)],
                                     "reference": [round(x, 5) for x in outside_per_pair(ref_blocks["strict"])]}
    timing["blocks"] = {"candidate": block_summary(cand_blocks), "reference": block_summary(ref_blocks["strict"])}
    if hidden is not None:
        cand_ms = cand_t.median_ms + hidden
        out.warnings.append(f"the candidate's own CUDA events missed about {hidden:.3f} ms per call (a side stream, "
                            f"patched events, deferred work?); speedups use the judge's wall clock ({cand_ms:.3f} ms)")
    timing["clocks"] = hardware.get("clocks")
    impossible = roofline_of(ev, timing, hardware, cand_ms, [ref_t.median_ms, tf32_t.median_ms] +
                           ([timing["reference_compiled"]["median_ms"]] if timing.get("reference_compiled") else []))
    if impossible is not None:
        out.reject("faster_than_hardware", impossible)
        return
    out.fields["speedup"] = ref_ms / max(cand_ms, 1e-9)
    out.fields["speedup_tf32"] = tf32_ms / max(cand_ms, 1e-9)
    if compiled_ms is not None:
        timing["speedup_compile"] = compiled_ms / max(cand_ms, 1e-9)
    if out.fields["speedup"] > limits.implausible_speedup:
        out.warnings.append(f"speedup {out.fields['speedup']:.1f}x exceeds {limits.implausible_speedup:g}x: "
                            "flagged for review (is the work really done, every call?)")


__all__ = ["profile_share", "time_candidate"]
