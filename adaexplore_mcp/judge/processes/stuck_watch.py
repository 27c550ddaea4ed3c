"""Where a runner is stuck, written to its log shortly before a request's deadline.

A timeout should say which line of the candidate never finished. faulthandler's watchdog can say so
from any state, but it reads the main thread's frames while that thread keeps running, and in a tight
loop under a TorchDispatchMode (the replay's data-flow trace) the dump broke off after two frames or crashed
the runner on the 2-core CI VM. So a Python thread takes the main thread's stack first, under the GIL
(`sys._current_frames`, a consistent snapshot), and writes it in faulthandler's format, which
`classify.from_fault_dump` reads. faulthandler's watchdog stays armed later, for code that never gives
the GIL back (a C loop), where the Python thread cannot run.
"""

from __future__ import annotations

import faulthandler
import sys
import threading
import time
import traceback
from typing import TextIO

# The Python snapshot is taken this long before the deadline, faulthandler's dump `fault_lead_s` before it.
SNAPSHOT_LEAD_S = 1.2
HEADER = "Stuck here (main thread, most recent call first):"


class StuckWatch:
    """One daemon thread per runner; `arm` before a request, `disarm` after it."""

    def __init__(self, out: TextIO, fault_lead_s: float) -> None:
        self._out, self._fault_lead_s = out, fault_lead_s
        self._main = threading.main_thread().ident
        self._cond = threading.Condition()
        self._at: float | None = None
        self._thread: threading.Thread | None = None

    def arm(self, timeout_s: object) -> None:
        """Watch a request that must finish within `timeout_s` seconds (ignored unless a number above 1)."""
        if not isinstance(timeout_s, (int, float)) or isinstance(timeout_s, bool) or timeout_s <= 1:
            return
        faulthandler.dump_traceback_later(timeout_s - self._fault_lead_s, exit=False, file=self._out)
        with self._cond:
            self._at = time.monotonic() + max(0.1, timeout_s - SNAPSHOT_LEAD_S)
            self._cond.notify()
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="stuck-watch", daemon=True)
            self._thread.start()

    def disarm(self) -> None:
        faulthandler.cancel_dump_traceback_later()
        with self._cond:
            self._at = None
            self._cond.notify()

    def _loop(self) -> None:
        with self._cond:
            while True:
                if self._at is None:
                    self._cond.wait()
                    continue
                remaining = self._at - time.monotonic()
                if remaining > 0:
                    self._cond.wait(remaining)
                    continue
                self._at = None
                self._snapshot()

    def _snapshot(self) -> None:
        frame = sys._current_frames().get(self._main) if self._main is not None else None
        if frame is None:
            return
        lines = [HEADER] + [f'  File "{f.filename}", line {f.lineno} in {f.name}'
                            for f in traceback.StackSummary.extract(traceback.walk_stack(frame), lookup_lines=False)]
        try:
            self._out.write("\n".join(lines) + "\n\n")
            self._out.flush()
        except (OSError, ValueError):
            pass
