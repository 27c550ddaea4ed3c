"""One evaluation, decided in the referee: build, check over fresh trials, show the work is the
candidate's own, then (on a GPU) time. Stops at the first "no".

Where things happen: the reference runner draws each trial's inputs and computes the reference's outputs;
the referee copies the inputs into memory it owns and lends them to the candidate's runner (CUDA IPC on a
GPU, bytes on the CPU); the candidate's outputs come back as handles the referee maps itself. Comparison,
the integrity checks and the verdict happen here, where neither the candidate nor the reference ever ran.
The candidate's runner serves this one candidate and is killed after.

Construction (KernelBench convention): Model and ModelNew are built under the same fresh seed and left in
the mode their constructors leave them in (training, usually). On a mismatch the check runs once more with
the reference's parameters and buffers copied in by name: a candidate that is right under either line-up
passes, and the result names the line-up it needed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import torch

from ..config import JudgeLimits
from ..errors import safe_str
from ..models import Verdict
from . import precision, wire
from .classify import static_error
from .compare import ALIASED, as_tensors, compare, mutated_input, nbytes, tolerance_for
from .host_inputs import host_values
from .referee import Referee, ReferenceFailure, oom_summary
from .checks.measured_precision import check_measured_precision
from .checks.perturbation import perturb_both
from .checks.pipeline import after_pass
from .checks.trial_plan import draw_plan
from .outcome import Outcome, fresh_seed
from .referee_replay import LAUNCHED_NAMES_SEEN, PendingReplay, finish_replay, start_replay
from .runners import OP_TRACE_ENV, RunnerGone, RunnerHandle

Progress = Callable[[float, str], None]
INTERP_TF32 = "fp32 tl.dot is exact under the interpreter; on a GPU it defaults to TF32 (input_precision='tf32')"
INTERP_LOWP = "fp16/bf16 arithmetic is emulated by the interpreter; GPU rounding may differ"
CAND_REPLY_SLACK = 1 << 20
TRIAL_BATCH_BYTES = 4 << 30  # inputs, outputs and their copies of the trials run in one call
# A trial set (inputs, outputs and their copies) below this: releases inside an evaluation keep each runner's
# allocator cache, because the next step allocates the same sizes again. On the H200 a flush and the cudaMalloc
# after it cost 5-8 ms per release, 16 releases on rmsnorm (bench/results/2026-12-04-l, profiled). One flush
# ends the evaluation (Referee.settle).
KEEP_CACHE_SET_BYTES = 1 << 30
# The replayed trial is drawn at random (checks/trial_plan.py). Its replay runs beside the trials after it when a
# set is below KEEP_CACHE_SET_BYTES; larger sets replay alone (both at once could run the device out of memory).
DETERMINISTIC = "reference deterministic on identical inputs: compared with one run of it, within the tolerance"
NONDETERMINISTIC = ("reference NOT deterministic on identical inputs (dropout in training mode? atomics?): compared "
                    "with one run of it, within the tolerance; a mismatch may be the reference's own noise")


def evaluate(ref_ee: Referee, req: dict, progress: Progress) -> dict[str, Any]:
    out = Outcome()
    limits = JudgeLimits(**req["limits"])
    deadline = time.monotonic() + float(req["timeout_s"])
    source = req["cand_source"]
    reasons, tf32_dot = precision.source_reasons(source)
    cand: RunnerHandle | None = None
    ref = None
    try:
        started = time.monotonic()
        ref = ref_ee.reference(req["task"], deadline)
        out.warnings.extend(ref.notes)
        cand = ref_ee.candidate_runner(deadline)
        out.fields["stages_ms"] = {"runners": round((time.monotonic() - started) * 1e3, 1)}
        out.fields["sandbox"] = ref_ee.sandbox
        if os.environ.get(OP_TRACE_ENV) in ("1", "profile"):  # where each stage's time goes, op by op (bench/judge_latency.py)
            ref.runner.trace = cand.trace = out.fields.setdefault("ops_ms", {})
        Evaluation(ref_ee, ref, cand, req, limits, deadline, out, progress, (reasons, tf32_dot)).run()
        out.oom = out.oom and ref_ee.memory_short(ref)  # a runner's word, checked while its memory is held
    except (KeyError, TypeError, IndexError, AttributeError, ValueError, ArithmeticError, wire.WireError) as exc:
        # A runner answered something malformed (only hostile code does; a number too large for a float too): its
        # candidate does not pass. The reference stays cached: `settle` drops it only if its channel is out of step.
        out.reject("bad_output", f"a runner's answer was malformed ({type(exc).__name__}: {safe_str(exc)[:200]})")
    except RunnerGone as exc:
        out.fail(Verdict.timeout if exc.kind == "timeout" else Verdict.crashed,
                 gone=exc.as_record())
    except torch.OutOfMemoryError as exc:  # the referee's own copies or comparisons
        out.oom = True
        freed = ref_ee.evict_all_but(None)
        out.fail(Verdict.runtime_error, error=static_error(
            f"the GPU ran out of memory in the judge while checking this task ({oom_summary(exc)}); "
            f"{freed} cached reference(s) were released", exception="OutOfMemoryError").model_dump())
    except ReferenceFailure as exc:
        if exc.oom and ref_ee.memory_short(None):
            out.oom = True
            freed = ref_ee.evict_all_but(None)
            out.warnings.append(f"the GPU ran out of memory; {freed} cached reference(s) were released")
        out.fail(Verdict.runtime_error, error=static_error(f"{exc}", exception="ReferenceFailure").model_dump())
    finally:
        if cand is not None:
            cand.retire()
        try:
            ref_ee.top_up()  # the replay's spare is replaced only now: a fork while timing would add noise
        except (OSError, RuntimeError):  # the zygote is gone: the next evaluation's runner reports it
            pass
        if ref is not None:
            ref_ee.settle(ref)
            if "ops_ms" in out.fields:
                ref.runner.trace = None  # the reference runner is cached: later evaluations trace their own
    return out.as_dict()


class Evaluation:
    """The steps of one evaluation; each returns early by recording a failure in `out`."""

    def __init__(self, referee: Referee, ref: Any, cand: RunnerHandle, req: dict, limits: JudgeLimits,
                 deadline: float, out: Outcome, progress: Progress, source_precision: tuple[list[str], bool]) -> None:
        self.referee, self.ref, self.cand, self.req = referee, ref, cand, req
        self.limits, self.deadline, self.out, self.progress = limits, deadline, out, progress
        self.source_precision = source_precision
        self.device = referee.device
        self.module = req["cand_module"]
        self.tol: tuple[float, float] = (limits.atol, limits.rtol)
        self.in_bytes = self.out_bytes = self.set_bytes = 0
        self.replay: PendingReplay | None = None  # the replay running beside the last trials
        self.work_checked = False  # the replay was judged, and the work is the candidate's
        self.plan = draw_plan(limits.trials)  # which trial is replayed, reuses a buffer, is off-distribution
        self.fidelity: dict[str, Any] = out.fields.setdefault("fidelity", self.plan.summary())
        self._mark = time.monotonic()
        out.fields.setdefault("stages_ms", {})

    def mark(self, stage: str) -> None:
        """Where the judge's time goes (reported with every result; the latency budget is spent here)."""
        now = time.monotonic()
        stages = self.out.fields["stages_ms"]
        stages[stage] = round(stages.get(stage, 0.0) + (now - self._mark) * 1e3, 1)
        self._mark = now

    def cand_call(self, header: dict, buffers: list[Any] = (), max_reply: int = 16 << 20) -> tuple[dict, list]:
        return self.cand.call(header, list(buffers), self.deadline, max_reply)

    def run(self) -> None:
        try:
            self._run()
        finally:
            if self.replay is not None:  # the evaluation ended before its replay was read
                self.replay.cancel()

    def _run(self) -> None:
        out = self.out
        out.fields["determinism"] = DETERMINISTIC if self.req["task"].get("deterministic", True) else NONDETERMINISTIC
        self.progress(0.1, "compiling: importing the candidate")
        names, kernels = self.referee.kernel_files(self.module)
        reply, _ = self.cand_call({"op": "load", "role": "cand", "module": self.module, "source": self.req["cand_source"],
                                   "kernel_files": names}, kernels)
        self.mark("load")
        if "verdict" in reply or "ok" not in reply:
            out.error(reply)
            return
        seed = fresh_seed()
        built, _ = self.referee.call_ref(self.ref, {"op": "build", "seed": seed}, self.deadline, "building the reference")
        reply, _ = self.cand_call({"op": "build", "seed": seed, "init_inputs": self.ref.init_inputs},
                                  self.ref.init_buffers)
        if "verdict" in reply or "ok" not in reply:
            out.error(reply)
            return
        self._flags(reply.get("flags"), "while building")
        perturb_both(self, seed, built.get("state"), reply.get("state"))  # parameters that matter
        self.mark("build")
        lineup = "same_seed"
        first = self.trials()
        self.mark("trials")
        if first is not None and not out.done and self.copy_reference_parameters():
            second = self.trials()
            self.mark("trials_copied")
            if second is None and not out.done:
                lineup = "copied_by_name"
                out.warnings.append("ModelNew matched only with the reference's parameters copied in by name; built "
                                    "under the same seed it differs (does it create parameters in another order?)")
            elif second is not None:
                out.fail(Verdict.mismatch, mismatch=first, mismatch_copied=second, trials=first.get("trial", 0) + 1)
                return
        elif first is not None and not out.done:
            out.fail(Verdict.mismatch, mismatch=first, trials=first.get("trial", 0) + 1)
            return
        if out.done:
            return
        out.fields["lineup"] = lineup
        out.fields["trials"] = self.limits.trials
        self._precision_report()
        if self.replay is not None:  # it ran beside the last trials (large sets were judged at once)
            self.progress(0.7, "checking the work is done by the candidate's kernels (a replay in another process)")
            self.judge_replay()  # marks replay_wait and replay_check
        if not self.work_checked:
            if not out.done:  # every passing run of the trials replays one of them: never
                out.reject("work_not_replayable", "no trial of the candidate was replayed (a bug in the judge)")
            return
        self.progress(0.72, "checking at a second, unseen shape set")
        after_pass(self)  # checks/pipeline.py
        self.mark("fidelity_after_pass")
        if out.done:
            return
        if self.device == "cuda":
            from .referee_timing import time_candidate

            self.progress(0.75, "timing")
            time_candidate(self)  # marks its own stages (timing_candidate, profile, timing_reference)

    # -- trials ---------------------------------------------------------------------------------------
    def trials(self) -> dict | None:
        """The plan's inputs per trial (the same seeds in both line-ups); the first mismatch (a dict) or None;
        other failures go in `out`. The first trial runs alone (it tells the sizes), then up to the replayed one
        (drawn at random: checks/trial_plan.py), whose record goes to the replay (`self.replay`), then the rest
        in as few calls as memory allows."""
        n = self.limits.trials
        replayed, done = self.plan.replayed, 0
        while done < n:
            end = replayed + 1 if done <= replayed else n
            batch = 1 if done == 0 else max(1, min(end - done, TRIAL_BATCH_BYTES // max(1, self.set_bytes)))
            mismatch = self.trial_batch(done, batch, n)
            done += batch
            if mismatch is not None or self.out.done:
                return mismatch
            if done == replayed + 1:
                self.begin_replay()
                if self.out.done:
                    return None
        return None

    def begin_replay(self) -> None:
        """Send the replayed trial's record to its own runner (an earlier line-up's replay is dropped); when
        sets are large, wait for its answer here, before any other trial allocates beside it."""
        if self.replay is not None:
            self.replay.cancel()
        self.mark("trials")
        # Compiled by now (the trials ran them): kept for later runs of this source, and lent to the replay's
        # runner, which would otherwise compile every kernel again on a GPU (a search's candidates are all new).
        self.referee.keep_kernels(self.cand, self.module, self.deadline)
        self.mark("kernel_cache")
        self.replay = start_replay(self)
        self.mark("replay_start")
        self.work_checked = False
        if self.replay is not None and not self.keep_cache and self.device == "cuda":
            self.judge_replay()

    def judge_replay(self) -> None:
        """Read the replay's answer and judge it (a rejection goes in `out`)."""
        replay, self.replay = self.replay, None
        self.work_checked = replay is not None and finish_replay(self, replay)

    def trial_batch(self, first: int, count: int, n: int, seeds: list[int] | None = None) -> dict | None:
        """Trials first..first+count-1 in one call: the plan's seeds, or `seeds` (a trial beyond the plan's)."""
        trials = range(first, first + count)
        scaled = [k for k, t in enumerate(trials) if t == self.plan.off_distribution]
        made = self.make_inputs(seeds or [self.plan.seeds[t] for t in trials], "trial", scaled=scaled)
        for _, ref_out in made:
            kinds = [type(o).__name__ for o in as_tensors(ref_out) if not isinstance(o, torch.Tensor)]
            if kinds:
                raise ReferenceFailure(f"the reference's forward returned {kinds[:3]}, not tensors")
        if first == 0:
            self._set_tolerance(made[0][1])
            self.in_bytes, self.out_bytes = nbytes(made[0][0]), nbytes(made[0][1])
            self.set_bytes = 2 * (self.in_bytes + self.out_bytes)
        lent, self.host_values = wire.pack([list(inputs) for inputs, _ in made]), host_values(made[-1][0])
        buffers: list[Any] = []
        sent = wire.encode_value(lent, buffers, pack=False)
        out_bytes = sum(nbytes(o) for _, o in made)
        reuse = [k for k, t in enumerate(trials) if t == self.plan.reused_buffer]
        reply, bufs = self.cand_call({"op": "forward", "sets": sent, "check_inputs": True, "record": True,
                                      "reuse": reuse}, buffers,
                                     max_reply=CAND_REPLY_SLACK + 4 * out_bytes + 2 * nbytes([i for i, _ in made])
                                     if self.device == "cpu" else 16 << 20)
        try:
            results = reply.get("results")
            if not isinstance(results, list) or not results or not all(isinstance(r, dict) for r in results):
                if reply.get("internal"):
                    self.out.error(reply)
                else:
                    self.out.reject("bad_output", "the candidate's process answered the trials with no results")
                return None
            opened: dict = {}  # the trials' outputs may share one packed buffer: open each share once
            for k, ((inputs, ref_out), got) in enumerate(zip(made, results)):
                trial = first + k
                self.progress(0.2 + 0.5 * trial / n, f"checking trial {trial + 1}/{n}")
                mismatch = self._judge_call(trial, got if isinstance(got, dict) else {}, bufs, inputs, lent[k], ref_out,
                                            opened)
                if mismatch is not None or self.out.done:
                    return mismatch
            if len(results) < count:
                self.out.reject("bad_output", f"the candidate's process answered {len(results)} of {count} trials")
            return None
        finally:
            del made, lent
            self.release()

    def make_inputs(self, seeds: list[int], key: str, keep: list | None = None,
                    scaled: list[int] = ()) -> list[tuple[list[Any], Any]]:
        """The reference's inputs and outputs for `seeds`; those at the indices in `scaled` off its distribution."""
        reply, bufs = self.referee.call_ref(self.ref, {"op": "make", "seeds": seeds, "key": key, "host_values": keep,
                                                       "scaled": list(scaled)}, self.deadline, "running the reference")
        if scaled and isinstance(reply.get("scaled"), dict):
            self.fidelity["off_distribution"] = str(next(iter(reply["scaled"].values()), ""))[:80]
        opened: dict = {}
        return [(list(wire.decode_value(s["inputs"], bufs, opened=opened)),
                 wire.decode_value(s["output"], bufs, opened=opened)) for s in reply["sets"]]

    def _judge_call(self, trial: int, reply: dict, bufs: list, inputs: list, lent: list, ref_out: Any,
                    opened: dict) -> dict | None:
        out = self.out
        if reply.get("frontend"):
            out.error(reply)
            return None
        if "verdict" in reply:
            out.error(reply)
            if reply.get("oom"):
                out.warnings.append("the candidate ran out of device memory; its process was discarded")
            return None
        self._flags(reply.get("flags"), "during the forward call")
        if reply.get("unconfirmed") and str(reply["unconfirmed"])[:300] not in out.unconfirmed:
            out.unconfirmed.append(str(reply["unconfirmed"])[:300])
        launched = reply.get("launched")
        names = [str(n)[:80] for n in launched][:LAUNCHED_NAMES_SEEN] if isinstance(launched, list) else []
        out.kernels.extend(n for n in dict.fromkeys(names) if n not in out.kernels)
        if not names:
            out.reject("no_triton_kernel", "no Triton kernel defined in the candidate launched during the forward "
                       "call; the work must be done by the candidate's own @triton.jit kernels")
            return None
        if reply.get("aliased") or reply.get("unsendable"):  # before the inputs: an unsendable answer has none
            out.reject(*(("output_aliases_input", ALIASED) if reply.get("aliased") else
                         ("bad_output", str(reply["unsendable"])[:400])))
            return None
        try:
            got = wire.decode_value(reply.get("outputs"), bufs, opened=opened)
        except wire.WireError as exc:
            out.reject("bad_output", f"the candidate's output could not be read as plain tensors: {exc}")
            return None
        if self.device == "cuda":  # the candidate wrote into the very memory the referee maps
            changed = mutated_input(inputs, lent)
        else:  # the runner's copies after the call, compared here (its own report could be patched)
            try:
                changed = mutated_input(inputs, list(wire.decode_value(reply.get("inputs_after"), bufs)))
            except (wire.WireError, TypeError, KeyError, AttributeError):
                out.reject("bad_output", "the candidate's process did not send back its inputs after the call")
                return None
        if changed is not None:
            out.reject("input_mutated", f"the forward call modified input {changed} in place; inputs must stay unchanged")
            return None
        atol, rtol = self.tol
        mismatch = compare(ref_out, got, trial, atol, rtol, self.limits.max_rel_norm)
        if mismatch is None and trial == 0:
            check_measured_precision(self, ref_out, got)  # the first trial's set is still kept by the reference
        if mismatch is not None and self.plan.role(trial):
            mismatch["inputs"] = self.plan.role(trial)  # the trial's inputs were not a plain draw
        return mismatch

    @property
    def keep_cache(self) -> bool:
        """Whether releases inside this evaluation keep the runners' allocator caches (KEEP_CACHE_SET_BYTES)."""
        return self.device == "cuda" and 0 < self.set_bytes < KEEP_CACHE_SET_BYTES

    def release(self, candidate: bool = True) -> None:
        """Both runners let go of what they lent this step (`candidate=False`: the reference's only)."""
        header = {"op": "release", "keep_cache": self.keep_cache}
        if candidate:
            self.cand_call(header)
        reply, _ = self.referee.call_ref(self.ref, header, self.deadline, "releasing the reference")
        if self.device == "cuda":
            torch.cuda.synchronize()
        if "reserved" in reply:  # a release that kept the cache says nothing: the evaluation's last one will
            self.referee.account(self.ref, int(reply["reserved"]))

    def copy_reference_parameters(self) -> bool:
        """True when at least one parameter or buffer was copied (else a second line-up is pointless)."""
        state, bufs = self.referee.call_ref(self.ref, {"op": "state"}, self.deadline, "reading the reference's state")
        names = state.get("names", [])
        values = wire.decode_value(state["values"], bufs)
        buffers: list[Any] = []
        lent = wire.pack(values)
        reply, _ = self.cand_call({"op": "load_state", "names": names,
                                   "values": wire.encode_value(lent, buffers, pack=False)}, buffers)
        self.release()
        copied = reply.get("copied") or []
        if reply.get("skipped"):
            self.out.warnings.append(f"reference parameters not copied into ModelNew (name or shape differs): "
                                     f"{[str(n)[:60] for n in reply['skipped'][:5]]}")
        return bool(copied)

    # -- precision and tolerance -------------------------------------------------------------------
    def _set_tolerance(self, ref_out: Any) -> None:
        dtypes = [t.dtype for t in as_tensors(ref_out) if isinstance(t, torch.Tensor) and t.is_floating_point()]
        task_dtype = min(dtypes, key=lambda d: torch.finfo(d).bits) if dtypes else torch.float32
        atol, rtol = tolerance_for(task_dtype, self.limits.atol, self.limits.rtol)
        self.tol = (atol, rtol)
        self.out.task_dtype = str(task_dtype).removeprefix("torch.")
        self.out.fields["tolerance"] = {"atol": atol, "rtol": rtol, "max_rel_norm": self.limits.max_rel_norm,
                                        "dtype": self.out.task_dtype}

    def _precision_report(self) -> None:
        reasons, tf32_dot = self.source_precision
        kept = precision.relative_to_task(reasons, self.out.task_dtype)
        self.out.precision_reasons[:0] = kept
        if self.device == "cpu":
            if tf32_dot and self.out.task_dtype == "float32":
                self.out.unconfirmed.append(INTERP_TF32)
            if any("16" in r or "half" in r for r in reasons):
                self.out.unconfirmed.append(INTERP_LOWP)

    def _flags(self, changes: Any, when: str) -> None:
        if isinstance(changes, list) and changes:
            text = "; ".join(str(c)[:120] for c in changes[:6])
            self.out.precision_reasons.append(f"changed global precision flags {when}: {text}")
