"""Does the candidate's own Triton code do the work? Decided by a replay in a process of its own.

The candidate's runner records every trial alike (record.py). One drawn at random after the first (which
may autotune, and record every config it benchmarked: checks/trial_plan.py) is sent, as a program, to a fresh spare runner that never imports
the candidate (run.py), which replays it while the candidate's remaining trials run in their own process
(on a GPU neither is timed). The referee lends it inputs drawn for this alone, and compares what comes back
itself, before any timing (a candidate that fails here is not timed):

- the program as recorded must compute the reference's output for those inputs (and for a second set, when
  one is lent): what the candidate reported it ran is what computes the result (a forged program must be a
  right one);
- the work policy (work_policy.py, checked in the replay on the run's data flow): no ATen compute operator
  outside the policy's table may write data that reaches an output beyond the glue bound (library fallback),
  and no output may be, bit for bit, a value PyTorch made inside forward without the kernels (laundering);
- with the writes of the candidate's launches taken from the run on the second set (or, for sets of
  SUBSTITUTE_MAX_SET_BYTES and more and tasks whose output hardly depends on the inputs, with its launches
  skipped), the output must not match: else the operators around its kernels did the work (a token launch,
  or a kernel writing a constant, next to PyTorch).

Nothing in the candidate's process can tell which of its trials is replayed, or how: it is not there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .. import precision, wire
from ..compare import as_tensors, compare, nbytes
from ..work_policy import GLUE_SHARE
from ..processes import RunnerGone, RunnerHandle

WHY = "the judge replays the candidate's recorded forward call in a separate process to check its kernels do the work"
CAND_REPLY_BYTES = 1 << 31
LAUNCHED_NAMES_KEPT = 32  # the trials' launched kernels the evaluation's result lists (evaluation.py)
LAUNCHED_NAMES_SEEN = 4096  # and those it remembers, for the check that a replayed program's kernels ran
SUBSTITUTE_MAX_SET_BYTES = 1 << 30  # larger sets: the skip check alone (a second set and the kernels' writes
# would sit beside the first in the replay's process)


@dataclass
class PendingReplay:
    """A replay sent to its own runner, running while the referee goes on with the candidate's last trials.
    The inputs and constants lent to it stay here, alive, until its answer has been read."""

    replayer: RunnerHandle
    program: dict
    lent: list
    ref_out: Any  # the reference's output for the replay's inputs, in the referee's own memory
    other_out: Any = None  # and for the second set, when one was lent

    def cancel(self) -> None:
        self.replayer.kill()


def start_replay(ev: Any) -> PendingReplay | None:
    """Take the candidate's last recorded trial (the evaluation asks right after the replayed one) and send it
    to a spare runner with inputs drawn for it alone; None (with the rejection in `ev.out`) when the
    candidate's process has no program to give."""
    program, constants = _take_program(ev)
    if program is None:
        return None
    from ..evaluation import fresh_seed

    two = ev.set_bytes < SUBSTITUTE_MAX_SET_BYTES
    sets = ev.make_inputs([fresh_seed(), fresh_seed()] if two else [fresh_seed()], "replay",
                          getattr(ev, "host_values", None))  # the replayed trial's numbers: host_inputs.py
    (inputs, ref_out), other_inputs, other_out = sets[0], None, None
    if two and compare(ref_out, sets[1][1], 0, *ev.tol, ev.limits.max_rel_norm) is not None:
        other_inputs, other_out = sets[1]  # the output tells the two sets apart: the substitution check holds
    # Copies in the referee's memory: the reference lets go of its own now (a 6 GiB task's set would otherwise
    # sit beside the next trial's), and of anything it lent at every release.
    lent = wire.pack([list(inputs), constants, *([list(other_inputs)] if other_inputs is not None else [])])
    ref_out, other_out = wire.pack(ref_out), (wire.pack(other_out) if other_out is not None else None)
    del inputs, other_inputs, sets
    if ev.device == "cuda":
        torch.cuda.synchronize()  # the copies are made before the memory they copy is let go of
    ev.referee.call_ref(ev.ref, {"op": "release", "only": "replay", "keep_cache": ev.keep_cache}, ev.deadline,
                        "releasing the reference")
    replayer = ev.referee.replay_runner()
    replayer.trace = ev.cand.trace  # traced with the candidate's ops when tracing (runners.OP_TRACE_ENV)
    pending = PendingReplay(replayer, program, lent, ref_out, other_out)
    try:
        names, files = ev.referee.kernel_files(ev.module, native=False)
        replayer.send({"op": "replay_prepare", "source": ev.req["cand_source"], "module": ev.module,
                       "program": program, "kernel_files": names}, files, ev.deadline)
        buffers: list[Any] = []
        replayer.send({"op": "replay", "sets": wire.encode_value(lent, buffers, pack=False)}, buffers, ev.deadline)
    except RunnerGone as exc:
        _gone(ev, exc)
        pending.cancel()
        return None
    return pending


def finish_replay(ev: Any, pending: PendingReplay) -> bool:
    """Read the replay's answers and judge them: True when the work is the candidate's; otherwise the rejection
    is in `ev.out`. The replay's runner is killed either way."""
    try:
        prep, _ = pending.replayer.receive(ev.deadline)
        max_reply = 8 * nbytes(pending.ref_out) + (1 << 20) if ev.device == "cpu" else 16 << 20
        rep, rbufs = pending.replayer.receive(ev.deadline, max_reply)
        ev.mark("replay_wait")
        ev.referee.keep_launchers(pending.replayer, ev.deadline)
        return _judge(ev, pending, prep, rep, rbufs)
    except RunnerGone as exc:
        return _gone(ev, exc)
    finally:
        ev.mark("replay_check")
        pending.replayer.retire()  # asked to let go only when both answers were read (else it is out of step)
        ev.mark("replay_kill")


def _take_program(ev: Any) -> tuple[dict | None, list]:
    """The candidate runner's last recorded trial: the program and copies of its constants, in the referee's
    memory (the runner lets go of them at once)."""
    reply, bufs = ev.cand_call({"op": "program"}, max_reply=CAND_REPLY_BYTES)
    program = reply.get("program")
    if not isinstance(program, dict):
        _unreplayable(ev, f"this call cannot be replayed: {str(reply.get('unreplayable') or 'no program')[:300]}")
        return None, []
    try:
        constants = wire.decode_value(reply.get("constants"), bufs)
        if not isinstance(constants, list):
            raise wire.WireError("the constants are not a list")
        return program, wire.pack(constants)
    except wire.WireError as exc:
        ev.out.reject("bad_output", f"the candidate's process sent an unreadable program: {exc}")
        return None, []
    finally:
        ev.cand_call({"op": "release", "keep_cache": ev.keep_cache})  # copied into the referee's memory by now


def _gone(ev: Any, exc: RunnerGone) -> bool:
    return _unreplayable(ev, f"the replay's process {'timed out' if exc.kind == 'timeout' else 'died'} running the "
                         f"candidate's kernels on new inputs ({str(exc)[:200]})")


def _judge(ev: Any, pending: PendingReplay, prep: dict, rep: dict, rbufs: list) -> bool:
    out, program, ref_out = ev.out, pending.program, pending.ref_out
    constants = pending.lent[1] if isinstance(pending.lent, list) and len(pending.lent) > 1 else []
    dtypes = tuple(str(c.dtype).removeprefix("torch.") for c in constants if isinstance(c, torch.Tensor))
    for reason in precision.relative_to_task(precision.program_reasons(program, dtypes), out.task_dtype):
        if reason not in out.precision_reasons:  # seen in what ran, however the source names it
            out.precision_reasons.append(reason)
    if prep.get("replay_error") or not prep.get("ok"):
        return _replay_failed(ev, str(prep.get("replay_error") or prep.get("internal") or "the replay would not start"),
                              prep.get("oom") is True)
    if rep.get("replay_error") or "full" not in rep:
        return _replay_failed(ev, "replaying it on new inputs failed: "
                              f"{str(rep.get('replay_error') or rep.get('internal') or 'no outputs')[:300]}",
                              rep.get("oom") is True)
    recorded = program.get("steps") if isinstance(program.get("steps"), list) else []
    unseen = sorted({str(s.get("launch"))[:80] for s in recorded if isinstance(s, dict) and "launch" in s}
                    - set(out.kernels))
    if unseen and len(out.kernels) < LAUNCHED_NAMES_SEEN:  # a program of kernels the call never launched: not
        # the call's record
        return _unreplayable(ev, f"the recorded program launches {unseen[0][:60]!r}, which no trial of the forward "
                             "call launched: the record is not the call that ran")
    try:
        opened: dict = {}
        full = wire.decode_value(rep["full"], rbufs, opened=opened)
        checked = wire.decode_value(rep["checked"], rbufs, opened=opened)
        other = wire.decode_value(rep["other"], rbufs, opened=opened) if rep.get("other") is not None else None
    except wire.WireError as exc:
        return _unreplayable(ev, f"the replay's outputs could not be read: {exc}")
    atol, rtol = ev.tol
    steps = program.get("steps") or []
    substituted = rep.get("check") == "substituted"
    if (substituted or other is not None) and (pending.other_out is None or other is None):
        return _unreplayable(ev, "the replay's process answered for runs it was not asked for")
    if pending.other_out is not None and not substituted:  # lent a second set, the weaker check is no answer
        return _unreplayable(ev, "the replay's process did not run the substitution check it was asked for")
    out.fields["work"] = {**(out.fields.get("work") or {}),
                          "replay": {**_summary(steps), "check": "substituted" if substituted else "skipped"}}
    mismatch = compare(ref_out, full, 0, atol, rtol, ev.limits.max_rel_norm)
    if mismatch is None and other is not None:
        mismatch = compare(pending.other_out, other, 0, atol, rtol, ev.limits.max_rel_norm)
    if mismatch is not None and rep.get("host_differs"):  # a value read back differs: the record is not general
        return _unreplayable(ev, "the call reads tensor values back to the host and decides with them, so its record "
                             f"does not hold for other inputs ({str(rep['host_differs'])[:200]}; {_brief(mismatch)}); "
                             "keep host-side decisions and kernel arguments independent of input values (pass such "
                             "values to the kernel as tensors)")
    if mismatch is not None:
        return _wrong_values(ev, mismatch)
    refs, got = as_tensors(ref_out), as_tensors(checked)
    count = len(refs)
    live = [i for i in range(count) if i not in _degenerate_outputs(ev.req["task"], count)]
    broken = [f for f in rep.get("policy") or [] if isinstance(f, dict) and f.get("output") in live]
    if broken:
        return _policy_rejection(ev, broken[0], count)
    if live:  # the outputs a constant would not pass: they must change when the kernels' work does
        refs, got = [refs[i] for i in live], [got[i] for i in live] if len(got) == count else None
    if got is not None and compare(refs, got, 0, atol, rtol, ev.limits.max_rel_norm) is None:
        how = ("with what the candidate's own Triton kernels wrote replaced by what they wrote for other inputs"
               if substituted else "with the candidate's own Triton kernels skipped")
        if not live:
            out.warnings.append(f"the output matched even {how} (this task is degenerate, so that proves little)")
            return True
        which = "its output" if count == len(live) else f"its outputs {live} (the others are degenerate)"
        out.reject("work_not_in_candidate_kernels", f"{how}, {which} still matched the "
                   "reference: the work is done elsewhere (PyTorch operators next to a token kernel, or next to a "
                   "kernel that writes a constant?); the candidate's own kernels must compute the result")
        return False
    return True


def _policy_rejection(ev: Any, finding: dict, count: int) -> bool:
    """An output that breaks the work policy (the replay's finding, work_policy.py), said with the operator."""
    which = f"output {finding.get('output')}" if count > 1 else "the output"
    op = str(finding.get("op"))[:80]
    if finding.get("rule") == "library_fallback":
        ev.out.reject("work_not_in_candidate_kernels", f"library fallback: the ATen operator {op} computed data that "
                      f"reaches {which} (compute operators wrote {str(finding.get('elements'))[:20]} elements reaching "
                      f"it, over the glue bound of {str(finding.get('bound'))[:20]}, 1/{GLUE_SHARE} of its elements); "
                      "around the candidate's kernels PyTorch may only allocate, view, move or convert data and "
                      "compute small glue (docs/judge.md, \"The work policy\"): the candidate's own kernels must "
                      "compute the result")
    else:
        ev.out.reject("work_not_in_candidate_kernels", f"{which} is, bit for bit, a value that the ATen operator {op} "
                      "made inside forward from data no candidate kernel wrote: the candidate's kernels only copied "
                      "PyTorch's result (laundering); they must compute it")
    return False


def _degenerate_outputs(task: dict, count: int) -> set[int]:
    """The outputs a constant or input-independent value would pass (the probe's finding): the work checks judge
    the others. Every output of a degenerate task probed before the probe said which."""
    if not task.get("degenerate"):
        return set()
    listed = task.get("degenerate_outputs")
    if not isinstance(listed, list):
        return set(range(count))
    return {i for i in listed if isinstance(i, int) and not isinstance(i, bool)}


def _replay_failed(ev: Any, why: str, oom: bool) -> bool:
    """The replay's process could not run the program. Out of device memory there (several referees' tasks on one
    GPU; the process says so as every runner does, device_memory.out_of_memory) says nothing about the candidate:
    the outcome asks for the evaluation once more on a fresh referee (`Outcome.oom`, kept only where the referee
    finds the device really short), as any out-of-memory does."""
    ev.out.oom = ev.out.oom or oom
    return _unreplayable(ev, why)


def _unreplayable(ev: Any, why: str) -> bool:
    ev.out.reject("work_not_replayable", f"{WHY}, and {why}")
    return False


def _wrong_values(ev: Any, mismatch: dict) -> bool:
    """The recorded call ran, on the replay's own inputs, and its output is wrong: said as a mismatch on values
    (with its detail in `mismatch`), the likely cause named by what the output shows."""
    ev.out.fields["mismatch"] = {**mismatch, "inputs": "replay"}
    if mismatch.get("reason") == "non_finite":
        cause = ("its output has NaN or Inf where the reference's has none: does it read memory it never wrote (the "
                 "replay fills torch.empty with NaN), or keep state from an earlier call?")
    else:
        cause = ("the call is wrong on these inputs: a numerical error the trials' inputs did not show (or a result "
                 "that depends on state kept from an earlier call)")
    what = "on values" if mismatch.get("reason") in ("values", "norm", "non_finite") else "in form"
    ev.out.reject("work_not_replayable", f"replayed on new inputs, the call's output did not match the reference's "
                  f"{what} ({_brief(mismatch)}); {cause}")
    return False


def _brief(mismatch: dict) -> str:
    keys = ("reason", "max_abs_error", "mismatched_fraction", "expected_spec", "got_spec")
    return ", ".join(f"{k}={str(mismatch[k])[:60]}" for k in keys if mismatch.get(k) is not None) or "mismatch"


def _summary(steps: list) -> dict[str, Any]:
    """What the replayed call consisted of: launches of the candidate's kernels, and library operators."""
    launches = [str(s.get("launch"))[:60] for s in steps if isinstance(s, dict) and "launch" in s]
    ops = sorted({str(s.get("op"))[:60] for s in steps if isinstance(s, dict) and "op" in s})
    return {"launches": len(launches), "kernels": sorted(set(launches))[:16], "operators": ops[:16],
            "operator_calls": sum(1 for s in steps if isinstance(s, dict) and "op" in s)}


__all__ = ["PendingReplay", "finish_replay", "start_replay"]
