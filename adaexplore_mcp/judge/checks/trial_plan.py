"""Which trial is which: drawn once per evaluation, by the referee, from fresh randomness.

Answers the shortcuts that rely on knowing which call is looked at closely:
- a candidate right only on the calls it expects the replay to take (the real kernel on its first two calls
  and PyTorch afterwards): the replayed trial is chosen at random among the trials after the first (the first
  may autotune, and its record would hold every configuration it benchmarked);
- an output cache keyed on an input's address (`x.data_ptr()`): one trial first runs a decoy call on its own
  input buffers with other values in them, and then the real call on the same buffers with the trial's values
  (`buffer_reuse.py`);
- a branch the sampling distribution never reaches: one trial draws scaled and shifted inputs
  (`off_distribution.py`), never the first (it sets the tolerance) and, where there is a choice, not the
  replayed one (the replay draws plain inputs of its own);
- a borderline candidate given a second chance by fresh inputs: the line-up with the reference's parameters
  copied in by name reruns the same seeds as the first line-up.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass


def _seed() -> int:
    return secrets.randbits(63)


@dataclass(frozen=True)
class TrialPlan:
    """The evaluation's trials: one seed each (shared by both line-ups), and the trials with a role."""

    seeds: tuple[int, ...]
    replayed: int
    reused_buffer: int | None
    off_distribution: int | None

    def role(self, trial: int) -> str | None:
        """'off_distribution' or 'reused_buffer' for a trial whose inputs are not a plain draw (a mismatch
        there says so), else None."""
        if trial == self.off_distribution:
            return "off_distribution"
        if trial == self.reused_buffer:
            return "reused_buffer"
        return None

    def summary(self) -> dict[str, int | None]:
        return {"replayed_trial": self.replayed, "reused_buffer_trial": self.reused_buffer,
                "off_distribution_trial": self.off_distribution}


def draw_plan(trials: int) -> TrialPlan:
    """A plan for `trials` trials (at least one): with one trial it is the replayed one and nothing else."""
    n = max(1, trials)
    later = list(range(1, n))
    if not later:
        return TrialPlan(seeds=(_seed(),), replayed=0, reused_buffer=None, off_distribution=None)
    replayed = later[secrets.randbelow(len(later))]
    others = [t for t in later if t != replayed] or later
    return TrialPlan(seeds=tuple(_seed() for _ in range(n)), replayed=replayed,
                     reused_buffer=later[secrets.randbelow(len(later))],
                     off_distribution=others[secrets.randbelow(len(others))])
