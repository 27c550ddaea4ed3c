"""Several briefs in one answer, each thing said once.

`next_step(count=k)` hands out k steps of one search: their task, reference, instructions, timing note and
most rules are the same. The first brief is whole; every other one (`more_steps`) leaves out each field equal
to the first's and names it in `same_as_first`, so a model reads the reference once, not k times.

Steps of one answer often share a parent: every step of iterative refinement grows from the best node, and UCT
picks a node again. Their parent's kernel, evaluation, failure and working memory are then the same, and a
step leaves them out when an earlier step of the answer carries them, naming that step in `same_parent_as`. In
the GPU campaign of 2026-12-07 (round 2, 6 steps a call) the parent's kernel written out six times made 64,602
of an iterative-refinement response's 84,253 characters on L3_43.

A step that an earlier call already handed out (it is still out, its brief unchanged) comes back as a stub naming
its step_id: the model has it; `next_step(resend=true)` repeats it whole.
"""

from __future__ import annotations

from collections.abc import Sequence

from adaexplore_mcp.search.types import Brief, StepBrief

# The fields worth sharing: big, and the same for every step of one search in one call (the model's required
# fields, strategy and timing_available, are tiny and stay in every brief).
SHARED_FIELDS = ("task", "reference_source", "instructions", "timing_note", "evaluated_shapes", "device", "gpu",
                 "rules", "rules_more", "best", "pool")
# What a step knows of its parent: the same for every step grown from one node in one answer.
PARENT_FIELDS = ("parent_kernel", "parent_evaluation", "parent_failure", "working_memory")
ALREADY_SENT = ("This step's brief was handed out by an earlier call and is unchanged: work from it (same "
                "step_id). Lost it? next_step(search_id, count, resend=true) repeats it whole.")


def _defaults(fields: Sequence[str]) -> dict:
    """Each field at its default: what a brief that leaves the fields out carries."""
    return {f: Brief.model_fields[f].get_default(call_default_factory=True) for f in fields}


def compact(first: Brief, other: Brief) -> Brief:
    """`other` without the fields it shares with `first` (named in same_as_first)."""
    same = [f for f in SHARED_FIELDS if getattr(other, f) == getattr(first, f) and getattr(first, f) not in
            (None, "", [], 0)]
    if not same:
        return other
    return other.model_copy(update={**_defaults(same), "same_as_first": same})


def share_parents(briefs: Sequence[Brief]) -> list[Brief]:
    """The briefs (in answer order) with each parent said once: a step whose parent an earlier step of the answer
    carries whole, with the same fields, leaves them out and names that step in `same_parent_as`."""
    carriers: dict[int, Brief] = {}
    out = []
    for b in briefs:
        if b.parent_node_id is None or b.already_sent or not b.step_id or b.parent_kernel is None:
            out.append(b)
            continue
        carrier = carriers.get(b.parent_node_id)
        if carrier is not None and all(getattr(b, f) == getattr(carrier, f) for f in PARENT_FIELDS):
            b = b.model_copy(update={**_defaults(PARENT_FIELDS), "same_parent_as": carrier.step_id})
        else:
            carriers.setdefault(b.parent_node_id, b)
        out.append(b)
    return out


def stub(brief: Brief) -> Brief:
    """A step already handed out, by id: what it is, not its whole brief again."""
    return Brief(search_id=brief.search_id, step_id=brief.step_id, kind=brief.kind,
                 parent_node_id=brief.parent_node_id, strategy=brief.strategy,
                 timing_available=brief.timing_available, budget=brief.budget, steps_used=brief.steps_used,
                 steps_left=brief.steps_left, already_sent=True, instructions=ALREADY_SENT)


def whole_steps(answer: StepBrief) -> list[Brief]:
    """Every step of an answer with what it left out put back (the fields of `same_as_first`, the parent of
    `same_parent_as`): for a program that proposes from one brief at a time."""
    first = Brief.model_validate(answer.model_dump(exclude={"more_steps"}))
    out, by_id = [first], {first.step_id: first}
    for b in answer.more_steps:
        fill = {f: getattr(first, f) for f in b.same_as_first}
        if b.same_parent_as in by_id:  # a carrier always comes earlier in the answer
            fill.update({f: getattr(by_id[b.same_parent_as], f) for f in PARENT_FIELDS})
        whole = b.model_copy(update={**fill, "same_as_first": [], "same_parent_as": None})
        out.append(whole)
        by_id[whole.step_id] = whole
    return out


def assemble(briefs: Sequence[Brief], fresh: Sequence[bool]) -> StepBrief:
    """One answer from the steps' briefs (in hand-out order) and whether each is new to the caller: new briefs
    first (the first whole, the others compacted against it), then stubs of the ones already sent."""
    order = [b for b, new in zip(briefs, fresh) if new] + [stub(b) for b, new in zip(briefs, fresh) if not new]
    order = share_parents(order)
    first = StepBrief.model_validate(order[0].model_dump())
    first.more_steps = [compact(first, b) if b.step_id and not b.already_sent else b for b in order[1:]]
    return first


__all__ = ["ALREADY_SENT", "PARENT_FIELDS", "SHARED_FIELDS", "assemble", "compact", "share_parents", "stub",
           "whole_steps"]
