"""Several briefs in one answer, each thing said once.

`next_step(count=k)` hands out k steps of one search: their task, reference, instructions, timing note and
most rules are the same. The first brief is whole; every other one (`more_steps`) leaves out each field equal
to the first's and names it in `same_as_first`, so a model reads the reference once, not k times. A step that
an earlier call already handed out (it is still out, its brief unchanged) comes back as a stub naming its
step_id: the model has it; `next_step(resend=true)` repeats it whole.
"""

from __future__ import annotations

from collections.abc import Sequence

from adaexplore_mcp.search.types import Brief, StepBrief

# The fields worth sharing: big, and the same for every step of one search in one call (the model's required
# fields, strategy and timing_available, are tiny and stay in every brief).
SHARED_FIELDS = ("task", "reference_source", "instructions", "timing_note", "evaluated_shapes", "device", "gpu",
                 "rules", "rules_more", "best")
ALREADY_SENT = ("This step's brief was handed out by an earlier call and is unchanged: work from it (same "
                "step_id). Lost it? next_step(search_id, count, resend=true) repeats it whole.")


def compact(first: Brief, other: Brief) -> Brief:
    """`other` without the fields it shares with `first` (named in same_as_first)."""
    same = [f for f in SHARED_FIELDS if getattr(other, f) == getattr(first, f) and getattr(first, f) not in
            (None, "", [], 0)]
    if not same:
        return other
    cleared = {f: Brief.model_fields[f].get_default(call_default_factory=True) for f in same}
    return other.model_copy(update={**cleared, "same_as_first": same})


def stub(brief: Brief) -> Brief:
    """A step already handed out, by id: what it is, not its whole brief again."""
    return Brief(search_id=brief.search_id, step_id=brief.step_id, kind=brief.kind,
                 parent_node_id=brief.parent_node_id, strategy=brief.strategy,
                 timing_available=brief.timing_available, budget=brief.budget, steps_used=brief.steps_used,
                 steps_left=brief.steps_left, already_sent=True, instructions=ALREADY_SENT)


def assemble(briefs: Sequence[Brief], fresh: Sequence[bool]) -> StepBrief:
    """One answer from the steps' briefs (in hand-out order) and whether each is new to the caller: new briefs
    first (the first whole, the others compacted against it), then stubs of the ones already sent."""
    order = [b for b, new in zip(briefs, fresh) if new] + [stub(b) for b, new in zip(briefs, fresh) if not new]
    first = StepBrief.model_validate(order[0].model_dump())
    first.more_steps = [compact(first, b) if b.step_id and not b.already_sent else b for b in order[1:]]
    return first


__all__ = ["ALREADY_SENT", "SHARED_FIELDS", "assemble", "compact", "stub"]
