"""One evaluation inside a worker: build, check over fresh trials, then (on a GPU) time.

Stops at the first "no" (builds? right? fast?). Every failure of candidate code becomes a value in the
returned dict (shaped like Evaluation's fields); only a bug in the judge raises. The parent process
validates the dict and adds what the worker cannot know (ids, duration, which GPU).
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..config import JudgeLimits
from ..models import Verdict
from ..tasks.format import import_file
from . import launches, precision, tamper
from .classify import (
    STAGE_BUILD, STAGE_IMPORT, STAGE_RUN, CandidateFile, Classified, classify, interpreter_internal, static_error,
)
from .compare import aliased_output, compare, mutated_input
from .reference import ReferenceFailure, TaskCache, build_module, clone_all, fresh_seed
from .timing import METHOD, Bench, gpu_lock, side_stream_excess, summarize

Progress = Callable[[float, str], None]
INTERP_TF32 = ("fp32 tl.dot is exact under the interpreter; on a GPU it defaults to TF32 "
               "(input_precision='tf32'), so results may differ there")
# The reference's time for a task is a constant of (task, shapes, GPU), but one measurement of a
# ~50 us kernel moves by a few percent between evaluations (allocation addresses, clocks). Speedups
# divide by the median of this worker's last REF_HISTORY reference medians for the task, so the same
# candidate evaluated repeatedly gets the same speedup to well within 3%.
REF_HISTORY = 8
INTERP_LOWP = "fp16/bf16 arithmetic is emulated by the interpreter; GPU rounding may differ"


@dataclass
class WorkerContext:
    """What a worker keeps between evaluations."""

    device: str  # "cuda" or "cpu"
    home: Path
    physical_index: int | None
    tasks: TaskCache
    bench: Bench | None = None
    gpu_name: str | None = None
    ref_history: dict[tuple, deque] = field(default_factory=dict)


@dataclass
class Outcome:
    """The evaluation being assembled; `as_dict()` is what travels to the parent."""

    verdict: Verdict = Verdict.passed
    fields: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    precision_reasons: list[str] = field(default_factory=list)
    unconfirmed: list[str] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)
    poisoned: bool = False

    def fail(self, verdict: Verdict, **fields: Any) -> "Outcome":
        self.verdict = verdict
        self.fields.update(fields)
        return self

    def error(self, c: Classified) -> "Outcome":
        self.poisoned = self.poisoned or c.poisoned
        return self.fail(c.verdict, error=c.error.model_dump())

    def reject(self, check: str, message: str) -> "Outcome":
        return self.fail(Verdict.rejected, rejected={"check": check, "message": message})

    def as_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            **self.fields,
            "warnings": self.warnings,
            "precision": {"below_fp32": bool(self.precision_reasons), "reasons": self.precision_reasons},
            "unconfirmed": self.unconfirmed,
            "kernels_launched": self.kernels,
            "poisoned": self.poisoned,
        }


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _check_flags(before: dict, out: Outcome, when: str) -> None:
    changes = precision.changed_flags(before, precision.snapshot())
    if changes:
        precision.restore(before)
        out.precision_reasons.append(f"changed global precision flags {when}: {'; '.join(changes)} (restored)")


def evaluate(req: dict, ctx: WorkerContext, progress: Progress) -> dict[str, Any]:
    out = Outcome()
    limits = JudgeLimits(**req["limits"])
    cand = CandidateFile(req["cand_path"], req["cand_source"])
    reasons, tf32_dot = precision.source_reasons(cand.source)
    out.precision_reasons.extend(reasons)
    if ctx.device == "cpu":
        if tf32_dot:
            out.unconfirmed.append(INTERP_TF32)
        if any("16" in r or "half" in r for r in reasons):
            out.unconfirmed.append(INTERP_LOWP)
    out.fields["tolerance"] = {"atol": limits.atol, "rtol": limits.rtol, "max_rel_norm": limits.max_rel_norm}
    before = tamper.snapshot()
    try:
        _evaluate(req, ctx, progress, out, cand, limits)
    except ReferenceFailure as exc:
        out.poisoned = True  # the reference worked when probed; the candidate may have broken global state
        out.fail(Verdict.runtime_error, error=static_error(
            f"{exc}. If the task probes fine, the candidate broke global state (monkeypatching torch?)",
            exception="ReferenceFailure").model_dump())
    precision.pin_strict()
    rebound = tamper.changed(before, tamper.snapshot())
    if rebound:
        out.poisoned = True
        out.warnings.append(f"the candidate rebound torch/triton attributes ({', '.join(rebound[:5])}); its worker "
                            "was replaced so no later candidate is judged with them, and this result is suspect")
    return out.as_dict()


def _evaluate(req: dict, ctx: WorkerContext, progress: Progress, out: Outcome,
              cand: CandidateFile, limits: JudgeLimits) -> None:
    task = ctx.tasks.get(req["task"])
    precision.pin_strict()
    flags = precision.snapshot()
    progress(0.1, "compiling: importing the candidate")
    try:
        module = import_file(req["cand_module"], Path(cand.path))
        cls = getattr(module, "ModelNew", None)
    except BaseException as exc:  # noqa: BLE001 - candidate code
        out.error(classify(exc, STAGE_IMPORT, cand))
        return
    if cls is None:
        out.fail(Verdict.compile_error, error=static_error(
            "the candidate does not define ModelNew (a drop-in for the task's Model)", exception="MissingModelNew").model_dump())
        return
    try:
        model = build_module(cls, task.init_inputs, ctx.device, seed=0)
    except BaseException as exc:  # noqa: BLE001
        out.error(classify(exc, STAGE_BUILD, cand))
        return
    _check_flags(flags, out, "while importing/building")
    if not _copy_weights(task.model, model, out):
        return
    last = None
    for trial in range(limits.trials):
        progress(0.15 + 0.6 * trial / max(1, limits.trials), f"checking trial {trial + 1}/{limits.trials}")
        last = _trial(trial, req["cand_module"], task, model, ctx, out, cand, limits, flags)
        if last is None:
            return
    out.fields["trials"] = limits.trials
    if ctx.bench is not None and last is not None:
        progress(0.8, "timing")
        task_key = (req["task"]["module"], tuple(sorted(req["task"]["shapes"].items())))
        _time(req["cand_module"], task_key, task, model, last, ctx, out, cand, limits)


def _copy_weights(ref: Any, model: Any, out: Outcome) -> bool:
    """Reference parameters and buffers copied into ModelNew by name; never rely on seeding."""
    if not isinstance(ref, torch.nn.Module) or not isinstance(model, torch.nn.Module):
        return True
    ref_sd, cand_sd = ref.state_dict(), model.state_dict()
    wrong = [f"{k}: reference {list(v.shape)} vs ModelNew {list(cand_sd[k].shape)}"
             for k, v in ref_sd.items() if k in cand_sd and cand_sd[k].shape != v.shape]
    if wrong:
        out.reject("missing_parameters", "ModelNew has parameters named like the reference's but shaped differently, "
                   f"so the reference weights cannot be copied: {'; '.join(wrong[:5])}")
        return False
    missing = [k for k in ref_sd if k not in cand_sd]
    if missing:
        out.warnings.append(f"ModelNew lacks the reference's parameters/buffers {missing[:5]}: their values were not "
                            "copied, so a pass relies on ModelNew initializing them identically")
    with torch.no_grad():
        for k, v in ref_sd.items():
            if k in cand_sd:
                cand_sd[k].copy_(v)
    return True


def _call(model: Any, inputs: list[Any], module: str, device: str) -> tuple[Any, list[str]]:
    launches.begin(module)
    try:
        with torch.no_grad():
            result = model(*inputs)
        _sync(device)
    finally:
        names = launches.end()
    return result, names


def _trial(trial: int, module: str, task: Any, model: Any, ctx: WorkerContext, out: Outcome,
           cand: CandidateFile, limits: JudgeLimits, flags: dict) -> tuple[list[Any], Any] | None:
    """One fresh input set; returns (inputs, reference output) when everything held, else None."""
    inputs = ctx.tasks.inputs(task, fresh_seed())
    ref_out = ctx.tasks.run(task, clone_all(inputs))
    cand_in = clone_all(inputs)
    try:
        got, names = _call(model, cand_in, module, ctx.device)
    except BaseException as exc:  # noqa: BLE001
        out.error(classify(exc, STAGE_RUN, cand))
        where = interpreter_internal(exc, cand) if ctx.device == "cpu" else None
        if where and out.verdict == Verdict.compile_error:
            out.unconfirmed.append(f"the error arose inside Triton's interpreter ({where}), not in a language check; "
                                   "some Triton/numpy versions' interpreters fail on valid kernels, so confirm on a GPU")
        return None
    _check_flags(flags, out, "during the forward call")
    out.kernels.extend(n for n in names if n not in out.kernels)
    if not names:
        out.reject("no_triton_kernel", "no Triton kernel defined in the candidate launched during the forward call; "
                   "the work must be done by the candidate's own @triton.jit kernels")
        return None
    try:  # the output is the candidate's object: a tensor subclass or odd type must not break the judge
        return _check_output(trial, inputs, cand_in, got, ref_out, out, limits)
    except Exception as exc:  # noqa: BLE001
        out.error(classify(exc, STAGE_RUN, cand))
        return None


def _check_output(trial: int, inputs: list[Any], cand_in: list[Any], got: Any, ref_out: Any, out: Outcome,
                  limits: JudgeLimits) -> tuple[list[Any], Any] | None:
    """Integrity (inputs untouched, no aliasing) and then values, for one trial."""
    changed = mutated_input(inputs, cand_in)
    if changed is not None:
        out.reject("input_mutated", f"the forward call modified input {changed} in place; inputs must stay unchanged")
        return None
    alias = aliased_output(got, cand_in)
    if alias is not None:
        out.reject("output_aliases_input", f"output {alias[0]} shares storage with input {alias[1]}; "
                   "write results to a new tensor")
        return None
    mismatch = compare(ref_out, got, trial, limits.atol, limits.rtol, limits.max_rel_norm)
    if mismatch is not None:
        out.fail(Verdict.mismatch, mismatch=mismatch, trials=trial + 1)
        return None
    return inputs, ref_out


def _time(module: str, task_key: tuple, task: Any, model: Any, last: tuple[list[Any], Any],
          ctx: WorkerContext, out: Outcome, cand: CandidateFile, limits: JudgeLimits) -> None:
    """Interleaved timing under the GPU lock; the last timed candidate output is re-checked."""
    inputs, ref_out = last
    x_c, x_r = clone_all(inputs), clone_all(inputs)
    held: list[Any] = [None]
    ref_model = task.model

    def cand_fn() -> None:
        precision.pin_strict()
        held[0] = model(*x_c)

    def ref_fn() -> None:
        precision.pin_strict()
        ref_model(*x_r)

    def ref_tf32_fn() -> None:
        precision.pin_tf32()
        ref_model(*x_r)

    assert ctx.bench is not None
    try:
        with gpu_lock(ctx.home, ctx.physical_index or 0), torch.no_grad():
            launches.begin(module)
            samples = ctx.bench.run([cand_fn, ref_fn, ref_tf32_fn], limits)
            synced = ctx.bench.synced([cand_fn, ref_fn])
    except BaseException as exc:  # noqa: BLE001
        out.error(classify(exc, STAGE_RUN, cand))
        return
    finally:
        launches.end()
        precision.pin_strict()
    mismatch = compare(ref_out, held[0], limits.trials, limits.atol, limits.rtol, limits.max_rel_norm)
    if mismatch is not None:
        out.reject("timed_output_mismatch", f"the output of the last timed call differs from the reference "
                   f"(reason {mismatch['reason']}, max abs error {mismatch.get('max_abs_error')})")
        return
    cand_t, ref_t, tf32_t = (summarize(s) for s in samples)
    key = (task_key, ctx.physical_index)
    history = ctx.ref_history.setdefault(key, deque(maxlen=REF_HISTORY))
    history.append((ref_t.median_ms, tf32_t.median_ms))
    ref_ms = statistics.median(h[0] for h in history)
    tf32_ms = statistics.median(h[1] for h in history)
    method = (METHOD.format(reps=cand_t.reps) + f"; speedups divide by the median of the reference medians of the "
              f"last {len(history)} evaluation(s) of this task on this GPU")
    out.fields["timing"] = {"candidate": cand_t.model_dump(), "reference": ref_t.model_dump(),
                            "reference_tf32": tf32_t.model_dump(), "method": method, "gpu": ctx.gpu_name}
    cand_ms = cand_t.median_ms
    hidden = side_stream_excess(cand_t.median_ms, ref_t.median_ms, synced[0], synced[1])
    if hidden is not None:
        cand_ms = cand_t.median_ms + hidden
        out.warnings.append(f"the candidate's CUDA events missed about {hidden:.3f} ms of work per call (a side "
                            f"stream?); speedups use device-synchronized time ({cand_ms:.3f} ms per call)")
    out.fields["speedup"] = ref_ms / max(cand_ms, 1e-9)
    out.fields["speedup_tf32"] = tf32_ms / max(cand_ms, 1e-9)
    if out.fields["speedup"] > limits.implausible_speedup:
        out.warnings.append(f"speedup {out.fields['speedup']:.1f}x exceeds {limits.implausible_speedup:g}x: "
                            "flagged for review (is the work really done, every call?)")
