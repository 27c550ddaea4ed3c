"""Domain types shared by the parts (tasks, judge, server): plain pydantic models, no behaviour.

Search- and memory-specific types live beside their code (`search/types.py`, `memory/types.py`);
the ones here cross every boundary.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator


class Verdict(str, Enum):
    """One per evaluation; the judge stops at the first failing question (builds? right? fast?)."""

    passed = "passed"
    compile_error = "compile_error"
    runtime_error = "runtime_error"
    mismatch = "mismatch"
    timeout = "timeout"
    crashed = "crashed"
    rejected = "rejected"


Backend = Literal["cuda", "cpu-interpreter"]


class TensorSpec(BaseModel):
    shape: list[int]
    dtype: str


class TaskCost(BaseModel):
    """The work any implementation of a task must do at GPU size, counted once per task from the reference:
    the floor under every kernel's time (roofline), whatever the kernel does inside."""

    min_bytes: int = Field(description="inputs read once + outputs written once + parameters/buffers read once")
    input_bytes: int = 0
    output_bytes: int = 0
    param_bytes: int = 0
    flops: int | None = Field(default=None, description="the reference's FLOPs by torch.utils.flop_counter "
                              "(matmul, convolution, attention; elementwise ops count 0)")
    note: str = ""


class TaskInfo(BaseModel):
    """What a client sees of a task (the reference source is a resource, not inlined)."""

    task_id: str
    name: str
    origin: Literal["builtin", "user", "synthesized"] = "user"
    degenerate: bool = False
    degenerate_outputs: list[int] | None = Field(default=None, description="which outputs a constant or "
                                                 "input-independent value would pass (null: all, when degenerate)")
    deterministic: bool = Field(default=True, description="false when two runs of the reference on identical "
                                "inputs differed (dropout in training mode, atomics)")
    warnings: list[str] = Field(default_factory=list)
    has_small_shapes: bool = False
    small_shapes: dict[str, int | list[int]] = Field(
        default_factory=dict,
        description="overrides of top-level constants used under the CPU interpreter; tasks sharing a name "
        "differ here or in source_hash",
    )
    source_hash: str = Field(default="", description="hash of the reference source")
    inputs: list[TensorSpec] = Field(default_factory=list, description="GPU-size inputs")
    outputs: list[TensorSpec] = Field(default_factory=list, description="GPU-size outputs")
    description: str = ""
    cost: TaskCost | None = Field(default=None, description="minimum bytes and the reference's FLOPs at GPU size "
                                  "(the roofline's numerator); null when not counted")


class TaskProbe(BaseModel):
    """What running a reference on several seeds (in a worker) revealed about it."""

    ok: bool
    error: str | None = None
    inputs: list[TensorSpec] = Field(default_factory=list)
    outputs: list[TensorSpec] = Field(default_factory=list)
    degenerate: bool = False
    degenerate_outputs: list[int] = Field(default_factory=list)
    degenerate_reasons: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    deterministic: bool = True
    input_elements: int = 0
    cost: TaskCost | None = None
    cost_unavailable: str | None = None


# Triton exceptions that only carry the error raised in kernel code, as their __cause__/__context__ or as
# their text (exact class names: OutOfResources also derives from TritonError but is an error of its own).
# The one list: the judge unwraps live exceptions with it (ErrorDetail.root_*), the skill memory reads
# traceback texts with it (details stored before root_* existed, texts collected on GPU hosts).
TRITON_WRAPPERS = frozenset({
    "CompilationError", "InterpreterError", "UnsupportedLanguageConstruct", "CompileTimeAssertionFailure",
    "TritonError",
})


class ErrorDetail(BaseModel):
    """The key line of an error and the candidate line that caused it: enough to act on.

    `root_*` is the judge's one reading of the live exception, below Triton's wrappers: the skill memory
    builds failure signatures from these fields alone, so the wording of `message` and `excerpt` (made
    for people) can change freely. Details stored before the fields existed have `root_exception` None.
    """

    exception: str = Field(description="exception type, e.g. 'CompilationError'")
    message: str = Field(description="the error's last meaningful line, trimmed")
    source_line: str | None = Field(default=None, description="the offending line of the candidate")
    source_lineno: int | None = None
    excerpt: str = Field(default="", description="a short tail of the traceback")
    root_exception: str | None = Field(
        default=None, description="type of the error below Triton's wrappers, e.g. 'TypeError' (a wrapper's own "
        "name when it carried only text); None on details recorded before this field existed")
    root_message: str | None = Field(
        default=None, description="that error's first meaningful line; None: `message` is it (a detail made "
        "without an exception: a static check, a dead worker)")
    root_in_kernel: bool = Field(default=False, description="raised in kernel code (found below a Triton wrapper)")


class MismatchDetail(BaseModel):
    output_index: int
    trial: int
    shape: list[int]
    reason: str = Field(description="'values', 'shape', 'dtype', 'device', 'non_finite' or 'norm'")
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    rel_norm_error: float | None = None
    worst_index: list[int] | None = None
    expected: float | None = None
    got: float | None = None
    mismatched_fraction: float | None = None
    expected_spec: str | None = None
    got_spec: str | None = None
    inputs: str | None = Field(default=None, description="which inputs showed it when not a plain draw: "
                               "'off_distribution' (scaled and shifted), 'reused_buffer' (an input buffer of an "
                               "earlier call with new values), 'replay' (the replay's own inputs)")
    shape_set: str | None = Field(default=None, description="'second' when found at the second, unseen shape set")


class RejectDetail(BaseModel):
    check: Literal[
        "no_triton_kernel",
        "input_mutated",
        "output_aliases_input",
        "timed_output_mismatch",
        "missing_parameters",
        "work_not_in_candidate_kernels",
        "work_not_replayable",
        "bad_output",
        "output_reused_across_calls",
        "events_disagree_with_wall_clock",
        "faster_than_hardware",
    ]
    message: str


class TimingStats(BaseModel):
    """Milliseconds, per call, summarized from CUDA-event samples (see judge/timing.py)."""

    median_ms: float
    iqr_ms: float
    min_ms: float
    max_ms: float
    reps: int


class Roofline(BaseModel):
    """Where the candidate's median time stands against this GPU's limits for the task's minimum work."""

    min_bytes: int = Field(description="inputs read once + outputs written once + parameters/buffers read once")
    flops: int | None = Field(default=None, description="the reference's FLOPs (torch.utils.flop_counter: matmul, "
                              "convolution, attention; elementwise ops count 0)")
    achieved_gbps: float
    achieved_tflops: float | None = None
    peak_gbps: float
    peak_tflops: float | None = None
    peak_basis: str = Field(description="which FLOP peak applies: 'fp32', 'tf32' or 'bf16'")
    pct_peak_bandwidth: float
    pct_peak_flops: float | None = None
    pct_roofline: float = Field(description="the roofline's time for this work (bytes at peak bandwidth or FLOPs "
                                "at peak, the larger) over the candidate's time, in percent")
    bound: Literal["memory", "compute"]
    lower_bound_ms: float = Field(description="min_bytes at peak bandwidth: no correct kernel is faster")
    bound_checked: bool = Field(default=True, description="whether a time under the bound was checked")
    peak_source: str = ""
    note: str | None = None


class Clocks(BaseModel):
    sm_mhz: int | None = None
    memory_mhz: int | None = None
    source: str = Field(default="", description="'nvml (current)' or 'device properties (maximum)'")


class Timing(BaseModel):
    candidate: TimingStats
    reference: TimingStats = Field(description="strict float32 reference, TF32 off")
    reference_tf32: TimingStats | None = Field(default=None, description="same reference, TF32 on")
    reference_compiled: TimingStats | None = Field(default=None, description="the reference under torch.compile "
                                                   "(compile_mode), strict float32")
    method: str
    gpu: str | None = None
    speedup_compile: float | None = Field(default=None, description="vs the reference compiled by torch.compile")
    compile_mode: str | None = None
    compile_s: float | None = Field(default=None, description="seconds torch.compile took; only on the evaluation "
                                    "that paid it (later ones reuse the compiled reference)")
    compile_unavailable: str | None = Field(default=None, description="why there is no speedup_compile")
    reference_timed_s_ago: float | None = Field(default=None, description="null: the reference was timed for this "
                                                "evaluation; else the age (s) of the timing it reused (a task's "
                                                "reference is timed afresh every 4th evaluation and after 120 s)")
    roofline: Roofline | None = None
    roofline_unavailable: str | None = None
    clocks: Clocks | None = Field(default=None, description="SM and memory clocks when timed")
    wall_per_call_ms: dict[str, float] | None = Field(default=None, description="the judge's own wall clock per "
                                                      "call (slope over blocks), candidate and reference: what "
                                                      "the candidate's events are held to")
    outside_per_call_ms: dict[str, list[float]] | None = Field(
        default=None, description="per pair of blocks (n, 2n calls), wall clock outside the events per call; "
        "work is 'hidden' only when every candidate pair exceeds the largest reference pair")
    blocks: dict[str, list[list[float]]] | None = Field(default=None, description="per timed block: calls, "
                                                        "wall ms, sum of event ms (candidate, reference)")


class Speedups(BaseModel):
    """One timed pass against every yardstick, shown alike wherever a speedup is shown (evaluation, brief,
    tree, exported file, report); null where that yardstick was not measured."""

    eager: float = Field(description="vs the strict fp32 PyTorch reference (TF32 off)")
    tf32: float | None = Field(default=None, description="vs the same reference with TF32 allowed")
    compiled: float | None = Field(default=None, description="vs the reference under torch.compile")
    pct_roofline: float | None = Field(default=None, description="the roofline's time for the task's minimum work "
                                       "over the kernel's time, in percent")
    bound: Literal["memory", "compute"] | None = None


class PrecisionReport(BaseModel):
    below_fp32: bool = Field(default=False, description="computes below the task's own precision (name kept)")
    task_dtype: str = "float32"
    reasons: list[str] = Field(default_factory=list)
    measured: dict[str, float] | None = Field(default=None, description="float32 tasks: the candidate's relative "
                                              "error against a float64 run of the reference (`candidate`), and "
                                              "the float32 reference's own (`reference`)")


class RuleRef(BaseModel):
    rule_id: str
    text: str


class Evaluation(BaseModel):
    """The judge's answer for one candidate. Expected failures are values here, never exceptions."""

    eval_id: str = ""
    task_id: str
    verdict: Verdict
    backend: Backend
    speedup: float | None = Field(default=None, description="vs strict fp32 reference; null without GPU timing")
    speedup_tf32: float | None = Field(default=None, description="vs the same reference with TF32 allowed")
    speedups: Speedups | None = Field(default=None, description="every yardstick side by side (eager, TF32, "
                                      "torch.compile, % of roofline); null without GPU timing")
    timing: Timing | None = None
    timing_unavailable: str | None = None
    error: ErrorDetail | None = None
    mismatch: MismatchDetail | None = None
    mismatch_copied: MismatchDetail | None = Field(default=None, description="when both line-ups mismatched: the "
                                                   "first mismatch with the reference's parameters copied in by name")
    rejected: RejectDetail | None = None
    precision: PrecisionReport = Field(default_factory=PrecisionReport)
    tolerance: dict[str, float | str] = Field(default_factory=dict, description="atol, rtol, max_rel_norm and the "
                                              "output dtype they follow")
    trials: int = 0
    shapes: Literal["full", "small"] = "full"
    unconfirmed: list[str] = Field(
        default_factory=list, description="why this verdict must be confirmed on a GPU (interpreter only)"
    )
    degenerate_task: bool = False
    kernels_launched: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    rules: list[RuleRef] = Field(default_factory=list, description="validity rules this failure falls under")
    duration_s: float = 0.0
    device_index: int | None = Field(default=None, description="which GPU ran it (CUDA ordinal on this host)")
    node: str | None = Field(default=None, description="which host ran it ('hostname/ray-node-id'), when the judge "
                             "runs on a Ray cluster; null for this host's own workers")
    sandbox: str = Field(default="none", description="isolation the candidate ran under, e.g. 'namespaces+rlimits+seccomp'")
    lineup: str | None = Field(default=None, description="how ModelNew's parameters were lined up with Model's: "
                               "'same_seed' (built under the same seed) or 'copied_by_name' (reference's copied in)")
    determinism: str | None = Field(default=None, description="the comparison policy when the reference itself is "
                                    "not deterministic")
    stages_ms: dict[str, float] = Field(default_factory=dict, description="where the judge's time went")
    ops_ms: dict[str, list[float]] | None = Field(default=None, description="only with ADAEXPLORE_TRACE_OPS=1: "
                                                  "each runner request as [calls, round-trip ms, ms inside the "
                                                  "runner], for latency work")
    fidelity: dict[str, Any] | None = Field(default=None, description="what the checks that the candidate computes "
                                            "the function, not the test, ran: the replayed trial, the reused "
                                            "buffer, the off-distribution trial, the parameter perturbation, the "
                                            "second shape set (judge/checks/)")
    work: dict[str, Any] | None = Field(default=None, description="where the GPU time went: the share spent in the "
                                        "candidate's own Triton kernels, and the other kernels by name; `replay`: "
                                        "what the replayed call ran (launches, kernels, library operators)")

    @property
    def correct(self) -> bool:
        return self.verdict == Verdict.passed

    @model_validator(mode="after")
    def _every_yardstick(self) -> "Evaluation":
        """`speedups` follows from the other fields wherever an evaluation is made or read back (results
        stored before it existed included); one implementation, in adaexplore_mcp.speedups."""
        if self.speedups is None and self.speedup is not None:
            from .speedups import of_evaluation  # imported here: speedups.py imports this module

            self.speedups = of_evaluation(self)
        return self


class CreateTaskResult(BaseModel):
    task_id: str
    created: bool = Field(description="false when the same name, source and small_shapes were registered before")
    degenerate: bool
    warnings: list[str] = Field(default_factory=list)
    inputs: list[TensorSpec] = Field(default_factory=list)
    outputs: list[TensorSpec] = Field(default_factory=list)
    reference_uri: str
    backend: Backend
    small_shapes: dict[str, Any] = Field(default_factory=dict, description="the sizes the CPU interpreter runs "
                                         "the task at (empty: full size); a GPU runs the full ones")


class TaskList(BaseModel):
    tasks: list[TaskInfo]


class ExportedKernel(BaseModel):
    search_id: str
    node_id: int
    speedup: float | None
    path: str = Field(description="where the standalone KernelBench file was written")
    source: str


class SearchReport(BaseModel):
    search_id: str
    html_path: str
    png_path: str | None
    png_note: str | None = Field(default=None, description="why no PNG was made, if none was")
    html_uri: str
    steps_used: int
    best_speedup: float | None
    best_node_id: int | None
    verdicts: dict[str, int]
