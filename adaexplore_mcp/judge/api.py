"""The Judge: the public face of evaluation. Runs nothing of the candidate (or the task) in this process.

`evaluate` takes a free worker (fairly among clients; thread-safe), hands it the sources, and turns
what came back (a result, silence, or a dead process) into a finished Evaluation: everything but its id
and the rules its failure falls under, which the app's evaluator adds when it stores it (the degenerate
task's flag and warning are set here, in `task_evaluation`, and nowhere else). The worker is a referee
that enforces the evaluation's deadline itself; this process only guards against the referee itself
hanging. Checks that need no execution (size, syntax, a ModelNew at top level) are answered
here directly.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from ..clients import CURRENT_CLIENT
from ..config import Settings
from ..models import Backend, ErrorDetail, Evaluation, TaskProbe, Verdict
from ..tasks.format import TaskSpec, source_hash, top_level_names
from .classify import CandidateFile, from_fault_dump, static_error
from .processes import CallResult, JudgeClosedError, Pool, WorkerConfig
from .result import Control, Gone
from .processes import describe_status, with_limits
from .. import pyparse

Progress = Callable[[float, str], None]
NO_TIMING = ("no GPU: kernels ran under Triton's CPU interpreter (TRITON_INTERPRET=1), "
             "whose speed says nothing about GPU speed")
DEGENERATE = ("this task is degenerate (a constant or input-independent output would pass): "
              "a pass here says little about correctness")
# The referee enforces the evaluation's deadline; this much more, and the referee itself is deemed hung.
REFEREE_MARGIN_S = 60.0


def _affinity(task_req: dict[str, Any]) -> tuple[str, bool]:
    """What a worker that judged this task keeps warm (its reference, at these shapes): the pool's affinity key."""
    return (str(task_req["module"]), bool(task_req["shapes"]))


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        return False


def _visible_gpus() -> list[str]:
    """Physical ids of the GPUs this process may use, in CUDA ordinal order."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None and env.strip() != "":
        return [x.strip() for x in env.split(",") if x.strip()]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


class Judge:
    """Evaluates candidates and probes tasks in warm worker processes."""

    def __init__(self, settings: Settings, device_indices: list[int] | None = None) -> None:
        self.settings = settings
        log_dir = str(settings.home / "logs")
        self._pool: Any
        if settings.ray_address:  # judge actors on a Ray cluster (cluster/pool.py); ray is imported only then
            from .cluster import RayPool

            self._pool = RayPool(settings, str(settings.home), log_dir)
            self._backend: Backend = "cuda" if self._pool.backend == "cuda" else "cpu-interpreter"
            return
        use_cuda = settings.device == "cuda" or (settings.device == "auto" and _cuda_available())
        self._backend = "cuda" if use_cuda else "cpu-interpreter"
        common = {"home": str(settings.home), "log_dir": log_dir, "cache_dir": str(settings.cache_dir),
                  "sandbox": settings.sandbox}
        if use_cuda:
            physical = _visible_gpus()
            indices = device_indices if device_indices is not None else list(range(len(physical)))
            # Several workers per GPU overlap one candidate's compile and checks with another's timing;
            # the per-GPU lock (timing.gpu_lock) still lets only one of them time at once.
            per_gpu = [i for i in indices for _ in range(max(1, settings.workers_per_gpu))]
            configs = [WorkerConfig(slot=slot, backend="cuda", **common, cuda_visible=physical[i],
                                    physical_index=int(physical[i]) if physical[i].isdigit() else i,
                                    gpu_sharers=per_gpu.count(i))
                       for slot, i in enumerate(per_gpu)]
        else:
            configs = [WorkerConfig(slot=i, backend="cpu", **common)
                       for i in range(max(1, settings.workers))]
        self._pool = Pool(configs)

    @property
    def backend(self) -> Backend:
        return self._backend

    def start(self, wait: bool = False) -> None:
        """Start the workers now instead of on first use; `wait` blocks until they are warm."""
        self._pool.start()
        if wait:
            self._pool.wait_ready()

    def close(self) -> None:
        """Terminate every worker (the pool is the one place that does). Later calls raise."""
        self._pool.close()

    def __enter__(self) -> "Judge":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- evaluation -------------------------------------------------------------------------------

    def _timeout(self, timeout_s: float | None) -> float:
        limits = self.settings.limits
        default = limits.timeout_s_gpu if self._backend == "cuda" else limits.timeout_s_cpu
        return min(timeout_s if timeout_s and timeout_s > 0 else default, limits.max_timeout_s)

    def _task_request(self, task: TaskSpec) -> tuple[dict[str, Any], bool]:
        small = self._backend != "cuda" and bool(task.small_shapes)
        return {"module": f"ref_{source_hash(task.source)}", "source": task.source, "degenerate": task.degenerate,
                "degenerate_outputs": None if task.degenerate_outputs is None else list(task.degenerate_outputs),
                "deterministic": task.deterministic,
                "shapes": dict(task.small_shapes) if small else {}}, small

    def _base(self, task: TaskSpec, small: bool, verdict: Verdict, **fields: Any) -> Evaluation:
        return task_evaluation(task, self._backend, verdict, small=small, **fields)

    def evaluate(self, task: TaskSpec, kernel_source: str, timeout_s: float | None = None,
                 progress: Progress | None = None, client: str | None = None) -> Evaluation:
        """Judge one candidate; every failure of the candidate is a verdict, never an exception."""
        started = time.monotonic()
        report = _safe_progress(progress)
        report(0.0, "queued")
        small = self._backend != "cuda" and bool(task.small_shapes)
        problem = _static_problem(kernel_source, self.settings.max_source_bytes)
        if problem is not None:
            ev = self._base(task, small, Verdict.compile_error, error=problem)
            ev.duration_s = time.monotonic() - started
            return ev
        task_req, small = self._task_request(task)
        name = f"cand_{source_hash(kernel_source)}"
        cand = CandidateFile(f"/tmp/{name}.py", kernel_source)
        limits = self.settings.limits
        timeout = self._timeout(timeout_s)
        request = {"op": "evaluate", "task": task_req, "cand_module": name, "cand_source": kernel_source,
                   "limits": asdict(limits), "timeout_s": timeout}
        for attempt in range(2):
            with self._pool.lease(client if client is not None else CURRENT_CLIENT.get(),
                                  key=_affinity(task_req)) as (config, worker):
                report(0.05, "compiling")
                call = worker.call(request, timeout + REFEREE_MARGIN_S, report)
                if call.kind != "ok" or call.result.control.spent:
                    worker.discard = True  # the pool kills it and starts a replacement now
            # Something ran out of GPU memory (on the H200: 6 GiB tasks while earlier tasks' processes held the
            # rest of the GPU): once more on a fresh referee, which starts with the judge's memory released.
            oom = call.kind == "ok" and call.result.control.oom_retry
            if not oom or attempt:
                break
            report(0.05, "the GPU ran out of memory; retrying on a fresh judge process")
        if self._pool.closed and (call.kind != "ok" or call.result.control.gone is not None):
            # The campaign's round 2 stored 6 such "crashes" (exit code 70 or none) in the 16 s its server took to
            # stop, each attached to its search as the kernel's failure.
            raise JudgeClosedError("the judge closed while this kernel was being evaluated (the server is "
                                   "stopping): no verdict was recorded; send the kernel again")
        ev = self._interpret(task, small, call, cand, timeout)
        if oom:
            ev.warnings.append("the GPU ran out of memory again on a fresh judge process: the task's reference "
                               "or this candidate needs more device memory than is free (try smaller shapes)")
        ev.device_index = config.physical_index if self._backend == "cuda" else None
        ev.node = getattr(worker, "node", None)  # set by the Ray pool only: which host ran it
        ev.duration_s = time.monotonic() - started
        report(1.0, ev.verdict.value)
        return ev

    def _interpret(self, task: TaskSpec, small: bool, call: CallResult, cand: CandidateFile,
                   timeout: float) -> Evaluation:
        if call.kind == "timeout":
            error = from_fault_dump(call.log, cand, f"the evaluation did not finish within {timeout:.0f}s and "
                                    "the worker was killed (an endless loop, a deadlock, or a kernel that "
                                    "never ends?)", exception="Timeout")
            ev = self._base(task, small, Verdict.timeout, error=error)
            if self._backend != "cuda":
                ev.unconfirmed.append("the CPU interpreter is far slower than a GPU: a kernel that finishes there "
                                      "may time out here")
            return ev
        if call.kind == "crashed":
            return self._base(task, small, Verdict.crashed, error=_crash_detail(call, cand))
        _raise_judge_bug(call.result.control)
        if call.result.control.gone is not None:
            return self._runner_gone(task, small, call.result.control.gone, cand, timeout, call.result.fields)
        fields = dict(call.result.fields)
        verdict = Verdict(fields.pop("verdict"))
        warnings = fields.pop("warnings", [])
        ev = self._base(task, small, verdict, **fields)
        ev.warnings.extend(warnings)
        return ev

    def _runner_gone(self, task: TaskSpec, small: bool, gone: Gone, cand: CandidateFile, timeout: float,
                     result: dict) -> Evaluation:
        """The candidate's runner missed its deadline or died: the referee killed what was left of it."""
        log = str(gone.log or "")
        if gone.kind == "timeout":
            call = CallResult("timeout", log=log)
        else:
            call = CallResult("crashed", exitcode=None, log=log, limits=tuple(map(str, gone.limits or ())))
            status = gone.status
            if isinstance(status, int):
                call.exitcode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        ev = self._interpret(task, small, call, cand, timeout)
        ev.sandbox = str(result.get("sandbox", "none"))
        if gone.kind == "protocol":
            ev.error.message = f"{gone.message} ({describe_status(gone.status)})"[:400]  # type: ignore[union-attr]
        return ev

    # -- tasks ------------------------------------------------------------------------------------

    def probe_task(self, task: TaskSpec, timeout_s: float | None = None) -> TaskProbe:
        """Run the reference on several seeds in a worker: builds? runs? shapes? degenerate?"""
        task_req, _ = self._task_request(task)
        timeout = self._timeout(timeout_s)
        request = {"op": "probe", "task": task_req, "limits": asdict(self.settings.limits), "timeout_s": timeout}
        ref = CandidateFile(f"/tmp/{task_req['module']}.py", task.source)
        with self._pool.lease(key=_affinity(task_req)) as (_, worker):
            call = worker.call(request, timeout + REFEREE_MARGIN_S, None)
            if call.kind != "ok" or call.result.control.spent:
                worker.discard = True
        if call.kind == "timeout":
            return TaskProbe(ok=False, error="the reference did not finish within the time limit; "
                             "reduce the problem size (or give small_shapes for the CPU interpreter)")
        if call.kind == "crashed":
            d = _crash_detail(call, ref)
            return TaskProbe(ok=False, error=f"running the reference crashed the worker: {d.message}")
        _raise_judge_bug(call.result.control)
        return TaskProbe(**call.result.fields)

    # -- profiling (profile_kernel) ------------------------------------------------------------------

    def profile(self, task: TaskSpec, kernel_source: str, runs: int = 5, timeout_s: float | None = None,
                progress: Progress | None = None, client: str | None = None) -> tuple[Any, str]:
        """A candidate and the task's reference, a few calls each under torch.profiler in a worker: a
        `profile_digest.ProfileResult` and the full table as Markdown ('' when there is none). Without a
        GPU the result says profiling needs one; a candidate that fails to import or run is its `error`."""
        from .profile_digest import NO_GPU, ProfileResult, ncu_status

        report = _safe_progress(progress)
        if self._backend != "cuda":
            return ProfileResult(task_id=task.task_id, available=False, unavailable=NO_GPU), ""
        problem = _static_problem(kernel_source, self.settings.max_source_bytes)
        if problem is not None:
            return ProfileResult(task_id=task.task_id, error=f"{problem.exception}: {problem.message}"), ""
        task_req, _ = self._task_request(task)
        timeout = self._timeout(timeout_s)
        request = {"op": "profile", "task": task_req, "cand_module": f"cand_{source_hash(kernel_source)}",
                   "cand_source": kernel_source, "runs": runs, "timeout_s": timeout}
        with self._pool.lease(client if client is not None else CURRENT_CLIENT.get(),
                              key=_affinity(task_req)) as (_, worker):
            report(0.05, "profiling")
            call = worker.call(request, timeout + REFEREE_MARGIN_S, report)
            if call.kind != "ok" or call.result.control.spent:
                worker.discard = True
        if call.kind != "ok":
            what = f"did not finish within {timeout:.0f}s" if call.kind == "timeout" else "crashed"
            return ProfileResult(task_id=task.task_id, error=f"the worker profiling the candidate {what} (a kernel "
                                 "that never ends, or a fatal CUDA error?); evaluate_kernel says more"), ""
        _raise_judge_bug(call.result.control)
        result = dict(call.result.fields)
        table = str(result.pop("table", "") or "")
        fields = {k: result[k] for k in ("candidate", "reference", "runs", "gpu", "error") if k in result}
        report(1.0, "profiled")
        return ProfileResult(task_id=task.task_id, ncu=ncu_status(), **fields), table


def _raise_judge_bug(control: Control) -> None:
    """A judge bug the referee reported is the server's exception, never a verdict."""
    if control.internal_error is not None:
        raise RuntimeError(f"judge worker failed (a bug in the judge):\n{control.internal_error}")


def task_evaluation(task: TaskSpec, backend: Backend, verdict: Verdict, *, small: bool = False,
                    **fields: Any) -> Evaluation:
    """A result for `task`, with what every result of it says whatever the candidate did.

    The one place that marks a result of a degenerate task (the flag and one warning) and an untimed
    backend: the app adds only the result's id and rules, and a fake judge builds its results here too.
    """
    ev = Evaluation(task_id=task.task_id, verdict=verdict, backend=backend, shapes="small" if small else "full",
                    degenerate_task=task.degenerate, **fields)
    if backend != "cuda":
        ev.timing_unavailable = NO_TIMING
    if task.degenerate:
        ev.warnings.append(DEGENERATE)
    return ev


def _safe_progress(progress: Progress | None) -> Progress:
    def report(fraction: float, message: str) -> None:
        if progress is not None:
            try:
                progress(fraction, message)
            except Exception:  # noqa: BLE001 - a broken callback must not break the evaluation
                pass

    return report


def _static_problem(source: str, max_bytes: int) -> ErrorDetail | None:
    """What is wrong with the source before running anything (size, syntax, no ModelNew), if anything."""
    size = len(source.encode(errors="replace"))
    if size > max_bytes:
        return static_error(f"the candidate source is {size} bytes; the limit is {max_bytes} bytes",
                            exception="SourceTooLarge")
    try:
        tree = pyparse.parse(source)
    except SyntaxError as exc:
        return static_error(f"line {exc.lineno}: {exc.msg}", exception=type(exc).__name__,
                            lineno=exc.lineno, source=source)
    except (ValueError, RecursionError, MemoryError) as exc:
        return static_error(f"the source does not parse: {type(exc).__name__}", exception=type(exc).__name__)
    if "ModelNew" not in top_level_names(tree):
        return static_error("the candidate does not define ModelNew at top level (a drop-in for the task's "
                            "Model, with the same constructor and forward signatures)", exception="MissingModelNew")
    return None


def _crash_detail(call: CallResult, cand: CandidateFile) -> ErrorDetail:
    code = call.exitcode
    if code is not None and code < 0:
        try:
            how = f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"was killed by signal {-code}"
    else:
        how = f"exited with code {code}"
    said = f"the worker process {with_limits(how, call.limits)} while running the candidate"
    if "memory" in call.limits:
        return from_fault_dump(call.log, cand, f"{said} (host memory: tensors or buffers kept on the CPU?)",
                               exception="HostMemoryLimit")
    return from_fault_dump(call.log, cand, f"{said} (a segfault, os._exit, or a fatal CUDA error such as an "
                           "out-of-bounds access?)", exception="WorkerCrashed")
