"""What a timed block's wall clock says its CUDA events missed: the pure analysis behind the judge's
hidden-work charge (`referee_timing.py` collects the blocks).

A block is (per-call event ms as the runner reported them, the referee's own wall ms from "primed" until
the picked outputs were mapped, calls). The events come from the candidate's process and can be forged or
blind (a side stream, patched events, work deferred past the reply); the wall clock cannot, but it also
holds what every block costs once (requests, lent sets, picked outputs) and what every call costs outside
its events (the L2 flush, launches). The reference, timed through the same protocol, calibrates both.
"""

from __future__ import annotations

import statistics

Block = tuple[list[float], float, int]

# Work the events may miss per call before the wall clock is believed instead. Honest candidates on the H200 showed
# up to 0.023 ms (run i: 2 of 3 scale_bias_gelu runs were charged at 0.02, their speedup 3.65x read 2.75x); the timing
# attacks of the red-team corpus hide 0.13-0.15 ms per call.
HIDDEN_ABS_MS = 0.04
HIDDEN_REL = 0.2


def samples(blocks: list[Block]) -> list[float]:
    return [t for times, _, _ in blocks for t in times]


def wall_per_call(blocks: list[Block]) -> float:
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


def outside_per_pair(blocks: list[Block]) -> list[float]:
    """Per call, what the wall clock saw outside the events, once for each pair of consecutive blocks
    of different lengths (`BLOCK_LENGTHS` makes pairs of n and 2n calls). Pure.

    A block's excess is its wall time less the sum of its calls' events; the difference between a pair's
    excesses over the difference of their calls cancels what a block costs once. One pair per estimate,
    not one slope over all blocks: on the H200 a single stalled reference block (the first after the
    candidate's process is killed) made the all-block slope negative in 5 of 9 honest runs, which zeroed
    the allowance and charged honest candidates 0.03-0.09 ms per call."""
    return [_outside(a, b) for a, b in _pairs(blocks)]


def _excess(block: Block) -> float:
    """What the wall clock saw outside a block's events (ms)."""
    times, wall, _ = block
    return wall - sum(times)


def _pairs(blocks: list[Block]) -> list[tuple[Block, Block]]:
    """Consecutive blocks (the first and second, the third and fourth) of different lengths."""
    return [(a, b) for a, b in zip(blocks[0::2], blocks[1::2]) if a[2] != b[2]]


def _outside(a: Block, b: Block) -> float:
    """`o` in `excess = F + o * n` from one pair: per call, what the wall clock saw outside the events."""
    return (_excess(b) - _excess(a)) / (b[2] - a[2])


def _fixed_per_pair(blocks: list[Block]) -> float:
    """The least a block costs once, `F` in `excess = F + o * n`, over consecutive pairs of blocks (0 when
    no pair says). A stalled long block makes a pair's F small, never large: the least is the candidate's
    worst case."""
    return min((max(0.0, _excess(a) - _outside(a, b) * a[2]) for a, b in _pairs(blocks)), default=0.0)


def _long_blocks(blocks: list[Block]) -> list[Block]:
    longest = max(n for _, _, n in blocks)
    return [b for b in blocks if b[2] == longest]


def hidden_per_call(cand_blocks: list[Block], ref_records: list[list[Block]]) -> float | None:
    """Milliseconds per call the candidate's own events missed, or None. Pure.

    `ref_records`: the reference's strict blocks, one list per timing of it (reference_timings.py). Two
    checks, each lenient where the reference is noisy (noise only ever helps the candidate):

    - Pairs: per call, the judge's wall clock exceeds the events by what every call costs outside them
      (the L2 flush, launches); the reference, timed through the same protocol, says how much that is. The
      candidate is accused when every one of its pairs shows an excess (their minimum) over the most
      generous of the reference's pairs (their maximum, never below 0), by more than `HIDDEN_ABS_MS` and
      `HIDDEN_REL` of its events. Work hidden in every call shows in every pair.
    - Long blocks: pairs cancel what a block costs once, so a candidate that stalls its short blocks by
      as much as it hides in them (it knows each block's length) evens its pairs out. What it cannot do
      is make a long block shorter: its excess holds the hidden work however the short ones were padded.
      Each block costs both sides the same once (the same requests, lent sets, picked outputs), so a
      long block's excess is held to the reference's, `F + o * n`: at most its excess at n_r calls plus
      its largest pair's `o` for each call beyond n_r (a reused timing may have other block lengths), over
      every long block it ran. Accused when the candidate's least excess over that bound exceeds the
      same allowance per call.

    Once accused, the candidate gets no credit for what a call costs outside its events: it is charged
    everything its wall clock saw outside them per call (the pairs' least excess; a long block's excess
    less the least a block costs once by the reference's pairs). Crediting the reference's figure let
    hidden work gain: on the H200 a candidate with patched events read 4.03x against the honest kernel's
    2.98x when credited the reference's most generous pair, and one on a side stream read 3.50x against
    2.97x when credited its least generous pair, because work on a side stream overlaps the next call's
    L2 flush, which an honest kernel's cannot."""
    if not cand_blocks:
        return None
    allowance = max(HIDDEN_ABS_MS, HIDDEN_REL * statistics.median(samples(cand_blocks)))
    charges = []
    cand = outside_per_pair(cand_blocks)
    o_hi = max([0.0, *(x for record in ref_records for x in outside_per_pair(record))])  # the most generous
    if cand and min(cand) - o_hi > allowance:
        charges.append(min(cand))
    ref_long = [b for record in ref_records if record for b in _long_blocks(record)]
    if ref_long:
        def most(n: int) -> float:  # E_r(n) = F + o * n is at most this for any o <= o_hi
            return max(max(0.0, _excess(b)) + o_hi * max(0, n - b[2]) for b in ref_long)

        fixed = min(_fixed_per_pair(record) for record in ref_records if record)
        mine = _long_blocks(cand_blocks)
        if min((_excess(b) - most(b[2])) / b[2] for b in mine) > allowance:
            charges.append(min((_excess(b) - fixed) / b[2] for b in mine))
    charge = max(charges, default=0.0)
    return charge if charge > 0 else None


def block_summary(blocks: list[Block]) -> list[list[float]]:
    """[calls, wall ms, sum of event ms] per block: the evidence behind a wall-clock verdict. Pure."""
    return [[calls, round(wall, 3), round(sum(times), 3)] for times, wall, calls in blocks]


__all__ = ["Block", "block_summary", "hidden_per_call", "outside_per_pair", "samples", "wall_per_call"]
