"""A runner's timed blocks (`time`, then `timed_outputs`): the ops `referee_timing.py` drives, apart from
the rest of the runner because they follow their own protocol. A `time` request carries a decoy input set
and the number of calls; the runner primes on the decoy and says "primed"; only then does the referee
start its wall clock and send the timed sets (`time_sets`), answered with the times. The outputs come
back only when the referee picks them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from . import precision, wire
from .classify import STAGE_RUN


class TimingOps:
    """Mixed into `runner.Runner`, whose state (conn, kept, model, compiled, bench, role) it uses."""

    conn: Any
    kept: dict[str, Any]
    model: Any
    compiled: Any
    bench: Any
    role: str
    _user_error: Callable[[str, BaseException, str], dict[str, Any]]  # how the role reports its user code's failure

    def _timing_model(self, req: dict) -> Any:
        """The model a `time` request names (None: the reference has not been compiled here)."""
        return self.compiled if req.get("variant") == "compiled" else self.model

    def _timed_sets(self, max_bytes: int) -> list[list[Any]] | dict[str, Any]:
        """The referee's next message after "primed": the timed input sets (or, for a malformed one, an
        answer saying so)."""
        nxt, bufs = wire.recv(self.conn, max_bytes)
        if nxt.get("op") != "time_sets":
            return {"internal": "the referee sent something other than the timed sets after 'primed'"}
        return [list(s) for s in wire.decode_value(nxt["sets"], bufs)]

    def op_time(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """GPU: the untimed `prime` pass on the decoy set, "primed", then `calls` timed calls cycling over
        the timed sets the referee sends next, every output kept for `timed_outputs`; the answer carries
        the times only."""
        from .runner import MAX_FROM_REFEREE
        from .timing import Bench

        if self.bench is None:
            self.bench = Bench()
        # The last block's outputs go now, not on a `release` of their own: one round trip less per block, and the
        # allocator hands their memory to this block's calls (the referee releases early when sets are large).
        self.kept.pop("timed", None)
        model = self._timing_model(req)
        if model is None:
            return {"ref_error": "the reference has not been compiled in this process"}
        decoy = wire.decode_value(req["decoy"]["sets"], bufs)
        if not isinstance(decoy, list) or len(decoy) != 1:
            return {"internal": "a timing request needs exactly one decoy input set"}
        mode = req.get("mode", "strict")
        precision.pin_tf32() if mode == "tf32" else precision.pin_strict()
        try:
            with torch.no_grad():
                self._prime(model, list(decoy[0]), int(req["calls"]))
                del decoy
                sets = self._timed_sets(MAX_FROM_REFEREE)
                if isinstance(sets, dict):
                    return sets
                # no warm-up call: the prime pass warmed up, on inputs the timed calls never see
                times, outs = self.bench.block(lambda i: model(*sets[i % len(sets)]), int(req["calls"]), 0)
        except BaseException as exc:  # noqa: BLE001
            precision.pin_strict()
            return self._user_error("forward (timed)", exc, STAGE_RUN)
        precision.pin_strict()
        self.kept["timed"] = (outs, [])
        return {"times_ms": times}

    def op_timed_outputs(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """The outputs of the last timed block that the referee picked (each call's own storage, unpacked:
        the referee checks that no storage comes back for two calls)."""
        outs = self.kept.get("timed", ([], []))[0]
        indices = req.get("indices")
        if not isinstance(indices, list) or not all(type(i) is int and 0 <= i < len(outs) for i in indices):
            return {"internal": "bad indices for the timed outputs"}
        return {"outputs": wire.encode_value([outs[i] for i in indices], out, pack=False)["list"]}

    def _prime(self, model: Any, decoy: list[Any], calls: int) -> None:
        """The block's calls once untimed on the decoy set, every output kept until the last, then dropped;
        then "primed" to the referee, which starts its wall clock and only then sends the timed sets. The
        caching allocator then holds the memory the timed calls' kept outputs need: without this a fresh
        process (every candidate runs in one) paid cudaMalloc inside its timed calls, 2-4x its kernels' time
        (bench/timing_agreement.py). The decoy is a set the reference drew that no timed call is given, and
        the timed sets arrive after "primed": nothing computed before the wall clock starts can answer a
        timed call."""
        kept = [model(*decoy) for _ in range(calls)]
        torch.cuda.synchronize()
        del kept
        wire.send(self.conn, {"primed": True})
