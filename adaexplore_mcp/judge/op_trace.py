"""What a runner tells about one request when the referee traces where time goes (runners.OP_TRACE_ENV).

Latency work only: nothing here decides a verdict, and a traced result is not a product figure. For each
request a traced runner reports its own milliseconds (the referee tells them apart from the round trip),
the modules the request imported for the first time (a fresh runner pays for each: the candidate's and
the replay's, every evaluation) and, in "profile" mode, the functions its time went to under cProfile.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any


class OpTrace:
    """One request's trace; `mode` is the request's `trace` field (falsy: nothing is measured)."""

    def __init__(self, mode: Any) -> None:
        self.mode = mode
        self.started = time.perf_counter()
        self.modules = set(sys.modules) if mode else None
        self.profiler = None
        if mode == "profile":
            import cProfile

            self.profiler = cProfile.Profile()

    def run(self, handler: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
        return self.profiler.runcall(handler, *args) if self.profiler is not None else handler(*args)

    def report(self, reply: dict[str, Any]) -> None:
        """Add the trace to the request's reply (`op_ms`, `op_imports`, `op_prof`)."""
        if not self.mode:
            return
        reply["op_ms"] = (time.perf_counter() - self.started) * 1e3
        imported = sorted(set(sys.modules) - (self.modules or set()))
        if imported:
            reply["op_imports"] = [len(imported), *imported[:12]]
        if self.profiler is not None:
            reply["op_prof"] = top_functions(self.profiler)


def top_functions(profiler: Any, count: int = 8) -> list[list[Any]]:
    """The functions a request spent its time in: [name, cumulative ms, own ms], the top by own time and the
    top by cumulative time (which names the caller of a costly callee)."""
    import pstats

    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    rows = [(f"{os.path.basename(f)}:{line}:{name}", ct * 1e3, tt * 1e3)
            for (f, line, name), (_, _, tt, ct, _) in stats.items()]
    top = sorted(rows, key=lambda r: -r[2])[:count] + sorted(rows, key=lambda r: -r[1])[:3 * count]
    return [[name, round(ct, 2), round(tt, 2)] for name, ct, tt in dict.fromkeys(top)]


__all__ = ["OpTrace", "top_functions"]
