"""The judge's processes: warm worker processes (each holds one referee) and, below each referee, the zygote
that forks sandboxed runners.

One face: the server side leases workers from `Pool` (`WorkerConfig`, `CallResult`, `WorkerStartError`); a
worker answers one request with `handle`; the referee starts runners through `Zygote` and talks to one through
`RunnerHandle` (with deadlines: `RunnerGone` when it died), and asks `idle_watch` whether a cached runner
worked while idle. Inside: pool.py, worker.py (the worker's loop),
runners.py (the referee's side of runners), zygote.py (a process of its own, run as
`python -m adaexplore_mcp.judge.processes.zygote`), idle_watch.py and stuck_watch.py (what a runner does while
nobody asks, or while it is late).
"""

from .pool import (RECYCLE_AFTER, STARTUP_TIMEOUT_S, CallResult, JudgeClosedError, Pool, WorkerConfig,
                   WorkerStartError)
from .runners import (
    OP_TRACE_ENV,
    WATCHDOG_LEAD_S,
    RunnerGone,
    RunnerHandle,
    Zygote,
    describe_status,
    runner_env,
    with_limits,
)
from . import idle_watch
from .stuck_watch import StuckWatch
from .worker import handle

__all__ = ["OP_TRACE_ENV", "RECYCLE_AFTER", "STARTUP_TIMEOUT_S", "WATCHDOG_LEAD_S", "CallResult", "JudgeClosedError",
           "Pool", "RunnerGone", "RunnerHandle", "StuckWatch", "WorkerConfig", "WorkerStartError", "Zygote",
           "describe_status", "handle", "idle_watch", "runner_env", "with_limits"]
