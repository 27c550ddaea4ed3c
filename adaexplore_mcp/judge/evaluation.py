"""One evaluation, decided in the referee: the orchestrator that takes the runners, walks the checks of
`checks/pipeline.py` in order over one context (`Evaluation`, the `checks.context.Judging` the checks see), and
gives the runners back. Stops at the first "no".

Where things happen: the reference runner draws each trial's inputs and computes the reference's outputs;
the referee copies the inputs into memory it owns and lends them to the candidate's runner (CUDA IPC on a
GPU, bytes on the CPU); the candidate's outputs come back as handles the referee maps itself. Comparison,
the integrity checks and the verdict happen here, where neither the candidate nor the reference ever ran.
The candidate's runner serves this one candidate and is killed after.
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
from .checks import trials
from .checks.pipeline import run_pipeline
from .checks.roofline import Timed
from .checks.trial_plan import draw_plan
from .classify import static_error
from .outcome import Outcome, fresh_seed
from .referee import Reference, Referee, ReferenceFailure, oom_summary
from .replay import PendingReplay
from .result import Gone, RefereeResult
from .processes import OP_TRACE_ENV, RunnerGone, RunnerHandle

__all__ = ["Evaluation", "Outcome", "evaluate", "fresh_seed"]

Progress = Callable[[float, str], None]
# A trial set (inputs, outputs and their copies) below this: releases inside an evaluation keep each runner's
# allocator cache, because the next step allocates the same sizes again. On the H200 a flush and the cudaMalloc
# after it cost 5-8 ms per release, 16 releases on rmsnorm (bench/results/2026-12-04-l, profiled). One flush
# ends the evaluation (Referee.settle).
KEEP_CACHE_SET_BYTES = 1 << 30


def evaluate(ref_ee: Referee, req: dict, progress: Progress) -> RefereeResult:
    """Judge one candidate (`req` as api.Judge sends it): the result, and what it says about this referee."""
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
        out.fail(Verdict.timeout if exc.kind == "timeout" else Verdict.crashed)
        out.gone = Gone(**exc.as_record())
    except torch.OutOfMemoryError as exc:  # the referee's own copies or comparisons
        out.oom = True
        freed = ref_ee.evict_all_but(None)
        out.fail(Verdict.runtime_error, error=static_error(
            f"the GPU ran out of memory in the judge while checking this task ({oom_summary(exc)}); "
            f"{freed} cached reference(s) were released", exception="OutOfMemoryError").model_dump())
    except ReferenceFailure as exc:
        if exc.worth_a_fresh_referee(ref_ee):
            out.oom = True
            freed = ref_ee.evict_all_but(None)
            how = "out of memory" if exc.oom else "its process died"
            out.warnings.append(f"the reference failed on a busy GPU ({how}); {freed} cached reference(s) were released")
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
    return out.result()


class Evaluation:
    """The context every check works on (checks/context.py); `run` walks the pipeline."""

    def __init__(self, referee: Referee, ref: Reference, cand: RunnerHandle, req: dict, limits: JudgeLimits,
                 deadline: float, out: Outcome, progress: Progress, source_precision: tuple[list[str], bool]) -> None:
        self.referee, self.ref, self.cand, self.req = referee, ref, cand, req
        self.limits, self.deadline, self.out, self.progress = limits, deadline, out, progress
        self.source_precision = source_precision
        self.device = referee.device
        self.module = req["cand_module"]
        self.tol: tuple[float, float] = (limits.atol, limits.rtol)
        self.in_bytes = self.out_bytes = self.set_bytes = 0
        self.host_values: Any = None
        self.replay: PendingReplay | None = None  # the replay running beside the last trials
        self.work_checked = False  # the replay was judged, and the work is the candidate's
        self.timed: Timed | None = None  # set by the timing, read by the roofline check
        self.plan = draw_plan(limits.trials)  # which trial is replayed, reuses a buffer, is off-distribution
        self.fidelity: dict[str, Any] = out.fields.setdefault("fidelity", self.plan.summary())
        self._mark = time.monotonic()
        out.fields.setdefault("stages_ms", {})

    def run(self) -> None:
        try:
            run_pipeline(self)
        finally:
            if self.replay is not None:  # the evaluation ended before its replay was read
                self.replay.cancel()

    def mark(self, stage: str) -> None:
        """Where the judge's time goes (reported with every result; the latency budget is spent here)."""
        now = time.monotonic()
        stages = self.out.fields["stages_ms"]
        stages[stage] = round(stages.get(stage, 0.0) + (now - self._mark) * 1e3, 1)
        self._mark = now

    def cand_call(self, header: dict, buffers: list[Any] = (), max_reply: int = 16 << 20) -> tuple[dict, list]:
        return self.cand.call(header, list(buffers), self.deadline, max_reply)

    @property
    def keep_cache(self) -> bool:
        """Whether releases inside this evaluation keep the runners' allocator caches (KEEP_CACHE_SET_BYTES)."""
        return self.device == "cuda" and 0 < self.set_bytes < KEEP_CACHE_SET_BYTES

    def release(self, candidate: bool = True) -> None:
        """Both runners let go of what they lent this step (`candidate=False`: the reference's only). On the CPU
        the release rides on each runner's next request (runners.RunnerHandle.defer_release): nothing waits for
        it, and no device memory is lent. On a GPU it is sent now: memory lent over CUDA IPC is freed only once
        the borrower lets go."""
        header = {"op": "release", "keep_cache": self.keep_cache}
        if self.device != "cuda":
            if candidate:
                self.cand.defer_release(header)
            self.ref.runner.defer_release(header)
            return
        if candidate:
            self.cand_call(header)
        reply, _ = self.referee.call_ref(self.ref, header, self.deadline, "releasing the reference")
        torch.cuda.synchronize()
        if "reserved" in reply:  # a release that kept the cache says nothing: the evaluation's last one will
            self.referee.account(self.ref, int(reply["reserved"]))

    def trial_batch(self, first: int, count: int, n: int, seeds: list[int] | None = None) -> dict | None:
        return trials.trial_batch(self, first, count, n, seeds)

    def make_inputs(self, seeds: list[int], key: str, keep: list | None = None,
                    scaled: list[int] = ()) -> list[tuple[list[Any], Any]]:
        return trials.make_inputs(self, seeds, key, keep, scaled)

    def copy_reference_parameters(self) -> bool:
        return trials.copy_reference_parameters(self)
