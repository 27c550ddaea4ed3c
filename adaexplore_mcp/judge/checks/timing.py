"""Timing on a GPU, and its guards (referee_timing.py, where the protocol lives).

Answers a timing the candidate shapes: outputs computed before the clock started (each block primes on a decoy
set, and only then are the timed sets lent), an output cache (fresh sets per block, `output_reused_across_calls`),
wrong outputs on timed calls (`timed_output_mismatch`: 4 picked per block, checked against the reference's), work
hidden from its own events (a side stream, patched events: hidden_work.py charges it the wall clock). Not run on
the CPU (the interpreter's times say nothing about a GPU's).
"""

from __future__ import annotations

from .context import Judging


def time_on_gpu(ev: Judging) -> None:
    """The candidate timed against the reference (and torch.compile); the numbers go in `ev.timed`."""
    from ..referee_timing import time_candidate  # torch.cuda's timing machinery: GPU referees only

    time_candidate(ev)  # marks its own stages (timing_candidate, profile, timing_reference)
