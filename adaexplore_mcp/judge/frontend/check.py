"""Compile what the CPU interpreter ran through Triton's real compiler front end (AST -> TTIR).

Without a GPU, candidates run under Triton's CPU interpreter, which executes a kernel's body as Python
and so accepts code the GPU compiler rejects (a module-level float read inside a kernel,
`tl.static_range` over a runtime bound, `break`, lambdas, unknown launch keywords...). This module
closes that gap in two steps, both inside the worker process:

1. Record (record.py: `install`, then `begin`/`end`, or a `Recorder` given to
   `launches.begin(recorder=...)`, which is what `Frontend` does for the runner): during the candidate's
   forward call we keep, for each launch of a kernel defined in the candidate's module, the kernel and its
   launch arguments as passed, each tensor replaced by a `TensorArg`, unbound.

2. Check (`frontend_check`, compiling through compile.py): for each recorded launch, replay it
   through Triton's own `JITFunction.run(..., warmup=True)` for a fake CUDA sm_90 target, with a `compile`
   that stops after the front end, so what comes back is the object a GPU launch would raise, which
   `classify()` maps to the candidate's line; triton.language is put back as compiled mode has it while a
   check runs, and Triton's global state is left as it was found.

A failure of this machinery (a Triton API that moved) is never reported as the candidate's error:
`frontend_check` returns `FrontendUnavailable(reason)` instead. A self-test (a valid kernel must
compile, an invalid one must not) guards each process once.

Not covered (a front-end compile cannot see them): later compiler stages (TTGIR/LLVM passes, ptxas),
limits checked when the binary loads (shared memory, registers) and run-time faults.

This module is the public entry point: the recording API (record.py) is re-exported from here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .record import (
    FrontendUnavailable,
    Launch,
    Recorder,
    TensorArg,
    _launch_key,
    _state,
    _with_site,
    begin,
    end,
    install,
    record_launch_args,
)
from .compile import _Machinery, _Session

TARGET = ("cuda", 90, 32)  # the GPU host's: H200, sm_90, warp size 32
DEFAULT_BUDGET_S = 20.0
# Errors Triton's autotuner absorbs for one config (it times that config as infinitely slow).
AUTOTUNE_PRUNED = frozenset({"OutOfResources", "CompileTimeAssertionFailure", "PTXASError"})

tl: Any = None  # triton.language, imported on first use (the self-test kernel reads it as a global)


# ================================================================================================ check

# The self-test: pointers, an int, a float, constexprs, a helper, tl.zeros (a library @jit function),
# tl.static_range over a constexpr. Plain functions here; wrapped in throwaway JITFunctions.
def _selftest_helper(x):
    return x * 2.0


def _selftest_kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr, STEPS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.zeros((BLOCK,), tl.float32)
    for i in tl.static_range(STEPS):
        acc += _selftest_helper(tl.load(x_ptr + offs, mask=mask, other=0.0)) * scale
    tl.store(y_ptr + offs, acc + tl.sum(acc, axis=0), mask=mask)


_SELFTEST: dict[str, str | None] = {}


def _selftest(session: _Session) -> str | None:
    """None when the machinery compiles a valid kernel and rejects an invalid one; else why not (cached)."""
    import triton

    if triton.__version__ in _SELFTEST:
        return _SELFTEST[triton.__version__]
    reason: str | None = None
    try:
        import torch

        session.jit_for(_selftest_kernel)
        session.translate_scope(_selftest_kernel)["_selftest_helper"] = session.jit_for(_selftest_helper)
        ptrs = (TensorArg(torch.float32), TensorArg(torch.float32))
        err = session.check(Launch(_selftest_kernel, _selftest_kernel, (*ptrs, 1000, 0.5),
                                   {"BLOCK": 128, "STEPS": 2, "num_warps": 4}))
        if err is not None:
            reason = f"the self-test kernel was rejected: {type(err).__name__}: {str(err).strip()[-300:]}"
        elif session.check(Launch(_selftest_kernel, _selftest_kernel, (*ptrs, 1000, 0.5, 128), {"STEPS": 2.5})) is None:
            reason = "the self-test's invalid kernel (tl.static_range(2.5)) was accepted"
    except _Machinery as exc:
        reason = str(exc)
    except Exception as exc:  # noqa: BLE001
        reason = f"self-test failed: {type(exc).__name__}: {exc}"
    finally:
        session.jits.clear()
        session.scopes.clear()
    _SELFTEST[triton.__version__] = reason
    return reason


@dataclass
class FrontendReport:
    """What `check_launches` did: the first error, or why the check could not run, and per-launch times."""

    error: BaseException | None = None
    error_launch: Launch | None = None
    unavailable: FrontendUnavailable | None = None
    checked: list[tuple[str, float]] = field(default_factory=list)  # (kernel name, seconds)
    seconds: float = 0.0

    @property
    def result(self) -> BaseException | FrontendUnavailable | None:
        return self.error if self.error is not None else self.unavailable


def _fail(report: FrontendReport, exc: BaseException, launch: Launch) -> None:
    tb = exc.__traceback__
    if launch.site and not (tb is not None and tb.tb_frame is launch.site[0]):
        exc = _with_site(exc, launch.site)
    report.error, report.error_launch = exc, launch


def check_launches(launches: list[Launch], budget_s: float = DEFAULT_BUDGET_S) -> FrontendReport:
    """Replay `launches` in order through the compiler front end; see `frontend_check`."""
    global tl
    t0 = time.perf_counter()
    report = FrontendReport()
    if not launches:
        return report
    known = next((la for la in launches if la.error is not None), None)
    try:
        import triton.language as tl_mod

        tl = tl_mod
    except Exception as exc:  # noqa: BLE001
        report.unavailable = FrontendUnavailable(f"triton is not importable: {exc}")
        return report
    seen: set = set()
    pruned: dict[int, tuple[BaseException, Launch]] = {}
    tuned_ok: set[int] = set()
    session = None
    try:
        session = _Session(TARGET)
        reason = _selftest(session)
        if reason is not None:
            raise _Machinery(reason)
        for launch in launches:
            key = _launch_key(launch)
            if key in seen:
                continue
            seen.add(key)
            if launch.error is not None:
                _fail(report, launch.error, launch)
                return report
            if time.perf_counter() - t0 > budget_s:
                report.unavailable = FrontendUnavailable(
                    f"the compiler front-end check stopped after {budget_s:g}s, {len(report.checked)} launch "
                    "configurations checked")
                return report
            t1 = time.perf_counter()
            err = session.check(launch)
            report.checked.append((launch.name, time.perf_counter() - t1))
            if err is None:
                if launch.via_autotuner:
                    tuned_ok.add(id(launch.fn))
            elif launch.via_autotuner and {t.__name__ for t in type(err).__mro__} & AUTOTUNE_PRUNED:
                pruned.setdefault(id(launch.fn), (err, launch))  # the autotuner skips that config
            else:
                _fail(report, err, launch)
                return report
        for fn_id, (err, launch) in pruned.items():
            if fn_id not in tuned_ok:  # no config compiled: the GPU launch fails too
                _fail(report, err, launch)
                return report
        return report
    except _Machinery as exc:
        report.unavailable = FrontendUnavailable(f"compiler front-end check unavailable: {exc}")
    except Exception as exc:  # noqa: BLE001 - the check itself must never break the judge
        report.unavailable = FrontendUnavailable(
            f"compiler front-end check failed internally: {type(exc).__name__}: {exc}")
    finally:
        if session is not None:
            session.close()
        report.seconds = time.perf_counter() - t0
    if known is not None:  # the check could not run, but a recorded host-side error still stands
        _fail(report, known.error, known)
    return report


def frontend_check(launches: list[Launch],
                   budget_s: float = DEFAULT_BUDGET_S) -> BaseException | FrontendUnavailable | None:
    """Compile each distinct recorded launch through Triton's front end for a fake CUDA sm_90 target.

    Returns the first exception a GPU launch would raise (the compiler's own object: give it to
    `classify()`), `FrontendUnavailable(reason)` when the check could not run (put the reason in
    `unconfirmed`; it is not a verdict), or None when every launch compiles. Triton's global state is
    left as it was found.
    """
    return check_launches(launches, budget_s).result


# ================================================================================================ adapter

class Frontend:
    """For a runner that records through `launches.begin(recorder=...)`:

        recorder = frontend.recorder()                 # before the forward call
        launches.begin(module, recorder=recorder)
        ... forward ...
        problem = frontend.check(recorder)             # the GPU's exception, or None

    `check` returns only the candidate's errors; when the check could not run it returns None and leaves
    the reason in `unavailable` (for `unconfirmed`). Launches that passed are not compiled again."""

    def __init__(self, budget_s: float = DEFAULT_BUDGET_S) -> None:
        install()
        self.budget_s = budget_s
        self.unavailable: FrontendUnavailable | None = None
        self.last: FrontendReport | None = None
        self._passed: set = set()

    def recorder(self) -> Recorder:
        rec = Recorder()
        _state.direct = rec  # a jit function called from host code lands here (launches sees launches only)
        return rec

    def check(self, recorder: Recorder) -> BaseException | None:
        if getattr(_state, "direct", None) is recorder:
            _state.direct = None
        todo = [la for la in recorder.close() if la.error is not None or _launch_key(la) not in self._passed]
        report = check_launches(todo, self.budget_s)
        self.last, self.unavailable = report, report.unavailable
        if report.error is None and report.unavailable is None:
            if len(self._passed) > 4096:
                self._passed.clear()
            self._passed.update(_launch_key(la) for la in todo)
        return report.error


__all__ = ["AUTOTUNE_PRUNED", "Frontend", "FrontendReport", "FrontendUnavailable", "Launch", "Recorder", "TensorArg",
           "begin", "check_launches", "end", "frontend_check", "install", "record_launch_args"]
