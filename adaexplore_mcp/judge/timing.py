"""GPU timing primitives: the runner's timed block, and the pure helpers the referee uses.

`Bench.block` runs in the candidate's (or the reference's) runner: per call, the L2 cache is flushed
(a 256 MB buffer is zeroed), CUDA events are recorded around the call with no host sync in between,
and every output is kept; one device-wide `torch.cuda.synchronize()` at the end waits for every
stream. Those events come from an untrusted process: `referee_timing.py` holds them to the referee's
own wall clock. `summarize` and `plan_reps` are pure (tested).

Two server processes on one host must never time on the same GPU at once: `gpu_lock` takes an
exclusive `fcntl.flock` on `<home>/locks/gpu<N>.lock` around the timed section.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import statistics
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..config import JudgeLimits
from ..models import TimingStats

METHOD = (
    "CUDA events per call in the candidate's own process, each block's calls run once untimed first on a decoy "
    "input set (the allocator primed; the timed sets lent only after), L2 flushed (256 MB) before each call, no syncs between calls, one device-wide "
    "synchronize per block, 4 outputs per block picked afterwards and checked; candidate blocks first, then "
    "(its process killed) the reference's; median of {reps} reps"
)
FLUSH_BYTES = 256 * 1024 * 1024


def summarize(samples_ms: Sequence[float]) -> TimingStats:
    """Median, inter-quartile range, min and max of per-call samples (milliseconds). Pure."""
    xs = sorted(float(x) for x in samples_ms if math.isfinite(float(x)))
    if not xs:
        raise ValueError("no finite timing samples")
    if len(xs) >= 2:
        q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    else:
        q1 = q3 = xs[0]
    return TimingStats(median_ms=statistics.median(xs), iqr_ms=q3 - q1, min_ms=xs[0], max_ms=xs[-1], reps=len(xs))


def plan_reps(estimate_ms: float, limits: JudgeLimits) -> tuple[int, int]:
    """(warm-up calls, timed reps) for one round costing `estimate_ms`: budgets in ms -> counts. Pure."""
    per_round = max(estimate_ms, 1e-3)
    warmup = max(1, min(50, int(limits.warmup_ms / per_round)))
    reps = int(limits.timing_budget_ms / per_round)
    return warmup, max(limits.min_reps, min(limits.max_reps, reps))


@contextlib.contextmanager
def gpu_lock(home: Path, physical_index: int) -> Iterator[None]:
    """Exclusive cross-process lock on one GPU while timing (several servers may share a host)."""
    lock_dir = home / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / f"gpu{physical_index}.lock", "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


class Bench:
    """Holds the runner's L2 flush buffer; `block` times consecutive calls of one callable."""

    def __init__(self) -> None:
        import torch

        self._torch = torch
        self._flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")

    def block(self, call: Callable[[int], Any], calls: int, warmup: int) -> tuple[list[float], list[Any]]:
        """Per-call milliseconds (CUDA events, L2 flushed before each call, no host sync between calls,
        one device-wide synchronize at the end) and every call's output, kept for the referee to check."""
        torch = self._torch
        for i in range(warmup):
            call(i)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
        outs = []
        torch.cuda.synchronize()
        for i in range(calls):
            self._flush.zero_()
            starts[i].record()
            outs.append(call(i))
            ends[i].record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends)], outs
