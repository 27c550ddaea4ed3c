"""The trials: fresh inputs drawn by the reference, lent to the candidate, its outputs judged call by call
(correctness.py), in as few requests as memory allows.

Answers a candidate right only on some inputs: every trial draws a fresh set under the plan's seed
(trial_plan.py; one off the sampling distribution, one reusing its buffers after a decoy call). On a mismatch
the trials run once more with the reference's parameters copied in by name, on the same seeds (fresh inputs
would give a borderline candidate a second chance): a candidate right under either line-up passes, and the
result names the line-up it needed. The replayed trial's record goes to the replay as soon as it ran
(work.py), so the replay runs beside the trials after it.
"""

from __future__ import annotations

from typing import Any

import torch

from ...models import Verdict
from .. import wire
from ..compare import as_tensors, nbytes, tolerance_for
from ..host_inputs import host_values
from ..referee import ReferenceFailure
from .context import Judging
from .correctness import judge_call
from .work import begin_replay

CAND_REPLY_SLACK = 1 << 20
TRIAL_BATCH_BYTES = 4 << 30  # inputs, outputs and their copies of the trials run in one call
COPIED = ("ModelNew matched only with the reference's parameters copied in by name; built under the same seed it "
          "differs (does it create parameters in another order?)")


def run_trials(ev: Judging) -> None:
    """The plan's trials under the same-seed line-up, and on a mismatch once more under the copied one; a
    mismatch under both is the verdict."""
    out = ev.out
    lineup = "same_seed"
    first = trials(ev)
    ev.mark("trials")
    if first is not None and not out.done and ev.copy_reference_parameters():
        second = trials(ev)
        ev.mark("trials_copied")
        if second is None and not out.done:
            lineup = "copied_by_name"
            out.warnings.append(COPIED)
        elif second is not None:
            out.fail(Verdict.mismatch, mismatch=first, mismatch_copied=second, trials=first.get("trial", 0) + 1)
            return
    elif first is not None and not out.done:
        out.fail(Verdict.mismatch, mismatch=first, trials=first.get("trial", 0) + 1)
        return
    if out.done:
        return
    out.fields["lineup"] = lineup
    out.fields["trials"] = ev.limits.trials


def trials(ev: Judging) -> dict | None:
    """The plan's inputs per trial (the same seeds in both line-ups); the first mismatch (a dict) or None;
    other failures go in `ev.out`. The first trial runs alone (it tells the sizes), then up to the replayed one
    (drawn at random: trial_plan.py), whose record goes to the replay (`ev.replay`), then the rest in as few
    calls as memory allows."""
    n = ev.limits.trials
    replayed, done = ev.plan.replayed, 0
    while done < n:
        end = replayed + 1 if done <= replayed else n
        batch = 1 if done == 0 else max(1, min(end - done, TRIAL_BATCH_BYTES // max(1, ev.set_bytes)))
        mismatch = ev.trial_batch(done, batch, n)
        done += batch
        if mismatch is not None or ev.out.done:
            return mismatch
        if done == replayed + 1:
            begin_replay(ev)
            if ev.out.done:
                return None
    return None


def trial_batch(ev: Judging, first: int, count: int, n: int, seeds: list[int] | None = None) -> dict | None:
    """Trials first..first+count-1 in one call: the plan's seeds, or `seeds` (a trial beyond the plan's)."""
    span = range(first, first + count)
    scaled = [k for k, t in enumerate(span) if t == ev.plan.off_distribution]
    made = ev.make_inputs(seeds or [ev.plan.seeds[t] for t in span], "trial", scaled=scaled)
    for _, ref_out in made:
        kinds = [type(o).__name__ for o in as_tensors(ref_out) if not isinstance(o, torch.Tensor)]
        if kinds:
            raise ReferenceFailure(f"the reference's forward returned {kinds[:3]}, not tensors")
    if first == 0:
        set_tolerance(ev, made[0][1])
        ev.in_bytes, ev.out_bytes = nbytes(made[0][0]), nbytes(made[0][1])
        ev.set_bytes = 2 * (ev.in_bytes + ev.out_bytes)
    lent, ev.host_values = wire.pack([list(inputs) for inputs, _ in made]), host_values(made[-1][0])
    buffers: list[Any] = []
    sent = wire.encode_value(lent, buffers, pack=False)
    out_bytes = sum(nbytes(o) for _, o in made)
    reuse = [k for k, t in enumerate(span) if t == ev.plan.reused_buffer]
    reply, bufs = ev.cand_call({"op": "forward", "sets": sent, "check_inputs": True, "record": True,
                                "reuse": reuse}, buffers,
                               max_reply=CAND_REPLY_SLACK + 4 * out_bytes + 2 * nbytes([i for i, _ in made])
                               if ev.device == "cpu" else 16 << 20)
    try:
        results = reply.get("results")
        if not isinstance(results, list) or not results or not all(isinstance(r, dict) for r in results):
            if reply.get("internal"):
                ev.out.error(reply)
            else:
                ev.out.reject("bad_output", "the candidate's process answered the trials with no results")
            return None
        opened: dict = {}  # the trials' outputs may share one packed buffer: open each share once
        for k, ((inputs, ref_out), got) in enumerate(zip(made, results)):
            trial = first + k
            if trial < n:  # a trial beyond the plan's (the second shape set) reported its own step
                ev.progress(0.2 + 0.5 * trial / n, f"checking trial {trial + 1}/{n}")
            mismatch = judge_call(ev, trial, got, bufs, inputs, lent[k], ref_out, opened)
            if mismatch is not None or ev.out.done:
                return mismatch
        if len(results) < count:
            ev.out.reject("bad_output", f"the candidate's process answered {len(results)} of {count} trials")
        return None
    finally:
        del made, lent
        ev.release()


def make_inputs(ev: Judging, seeds: list[int], key: str, keep: list | None = None,
                scaled: list[int] = ()) -> list[tuple[list[Any], Any]]:
    """The reference's inputs and outputs for `seeds`; those at the indices in `scaled` off its distribution."""
    reply, bufs = ev.referee.call_ref(ev.ref, {"op": "make", "seeds": seeds, "key": key, "host_values": keep,
                                               "scaled": list(scaled)}, ev.deadline, "running the reference")
    if scaled and isinstance(reply.get("scaled"), dict):
        ev.fidelity["off_distribution"] = str(next(iter(reply["scaled"].values()), ""))[:80]
    opened: dict = {}
    return [(list(wire.decode_value(s["inputs"], bufs, opened=opened)),
             wire.decode_value(s["output"], bufs, opened=opened)) for s in reply["sets"]]


def copy_reference_parameters(ev: Judging) -> bool:
    """The copied line-up: the reference's parameters and buffers copied into ModelNew by name. True when at
    least one was copied (else a second line-up is pointless)."""
    state, bufs = ev.referee.call_ref(ev.ref, {"op": "state"}, ev.deadline, "reading the reference's state")
    names = state.get("names", [])
    values = wire.decode_value(state["values"], bufs)
    buffers: list[Any] = []
    lent = wire.pack(values)
    reply, _ = ev.cand_call({"op": "load_state", "names": names,
                             "values": wire.encode_value(lent, buffers, pack=False)}, buffers)
    ev.release()
    copied = reply.get("copied") or []
    if reply.get("skipped"):
        ev.out.warnings.append(f"reference parameters not copied into ModelNew (name or shape differs): "
                               f"{[str(n)[:60] for n in reply['skipped'][:5]]}")
    return bool(copied)


def set_tolerance(ev: Judging, ref_out: Any) -> None:
    """The tolerance by the output's narrowest floating dtype (the task's dtype), from the first trial."""
    dtypes = [t.dtype for t in as_tensors(ref_out) if isinstance(t, torch.Tensor) and t.is_floating_point()]
    task_dtype = min(dtypes, key=lambda d: torch.finfo(d).bits) if dtypes else torch.float32
    atol, rtol = tolerance_for(task_dtype, ev.limits.atol, ev.limits.rtol)
    ev.tol = (atol, rtol)
    ev.out.task_dtype = str(task_dtype).removeprefix("torch.")
    ev.out.fields["tolerance"] = {"atol": atol, "rtol": rtol, "max_rel_norm": ev.limits.max_rel_norm,
                                  "dtype": ev.out.task_dtype}
