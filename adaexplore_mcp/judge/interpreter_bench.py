"""Autotuning under Triton's CPU interpreter: a wall-clock benchmarker where Triton has none.

An `@triton.autotune` kernel benchmarks its configs with the active driver's benchmarker. Under the
interpreter on a machine without a GPU there is no active driver, so every autotuned kernel fails with
"0 active drivers" before it computes anything: a legitimate candidate would be judged a runtime error on
the CPU and pass on the GPU. Installed in the CPU runners only (the zygote, under TRITON_INTERPRET=1), this
gives the autotuner a benchmarker that runs each config once and times it with the wall clock. Which config
wins does not matter for correctness there: every config must compute the same result.

A benchmarker the candidate passes (`do_bench=`) is kept as it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wall_clock_bench(kernel_call: Callable[[], Any], quantiles: Any = None, **_: Any) -> Any:
    """One run of `kernel_call`, in ms; as many values as quantiles were asked for (Triton's contract)."""
    started = time.perf_counter()
    kernel_call()
    ms = (time.perf_counter() - started) * 1e3
    return [ms] * len(quantiles) if quantiles else ms


def install() -> bool:
    """Give Triton's Autotuner the wall-clock benchmarker when it was given none. False where this Triton has
    no Autotuner of that shape (then autotuned kernels fail under the interpreter as Triton makes them)."""
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return False
    if "do_bench" not in vars(Autotuner):
        return False

    def do_bench(self: Any) -> Callable[..., Any]:
        return getattr(self, "_do_bench", None) or wall_clock_bench

    Autotuner.do_bench = property(do_bench)  # type: ignore[assignment,method-assign]
    return True


__all__ = ["install", "wall_clock_bench"]
