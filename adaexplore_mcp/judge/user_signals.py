"""User code's signal handlers and timers, kept out of the judge's own code in a runner.

A handler a candidate (or a task's reference) installs, with a timer it arms, would raise its error inside the
judge's code in the runner; the runner puts its own handlers back after each call into user code (`calm`), and
what still escapes into its code is the user's error (`classify.escaped`). faulthandler's C handlers (processes/zygote.py)
are left alone: `signal.signal` could not put them back.
"""

from __future__ import annotations

import contextlib
import signal
from typing import Any

FAULT_SIGNALS = {signal.SIGSEGV, signal.SIGFPE, signal.SIGABRT, signal.SIGBUS, signal.SIGILL, signal.SIGUSR1}


def own_handlers() -> dict[int, Any]:
    """The runner's signal handlers before any user code ran (Python's: FAULT_SIGNALS are left alone)."""
    skip = {signal.SIGKILL, signal.SIGSTOP, *FAULT_SIGNALS}
    return {s: h for s in signal.valid_signals() if s not in skip and (h := signal.getsignal(s)) is not None}


def calm(handlers: dict[int, Any]) -> None:
    """Disarm the timers user code armed and put back the runner's signal handlers, so that no handler of the
    user's fires in the judge's code. `signal.signal` first runs a handler already pending: what it raises
    goes up (the user's error), with the timers already off."""
    for timer in (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF):
        signal.setitimer(timer, 0)
    for s, mine in handlers.items():
        if signal.getsignal(s) != mine:
            signal.signal(s, mine)


def quiet(handlers: dict[int, Any]) -> None:
    """`calm`, whatever handlers still pending raise (each try runs them; no timer re-arms them)."""
    for _ in range(4):
        with contextlib.suppress(BaseException):
            return calm(handlers)
