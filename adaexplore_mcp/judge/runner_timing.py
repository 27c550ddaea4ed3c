"""A runner's timed blocks (`time`, then `timed_outputs`): the ops `referee_timing.py` drives, apart from
the rest of the runner because they follow their own protocol (two answers to one request: "primed",
then the times; the outputs only when the referee picks them).
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
    _error: Callable[[BaseException, str], dict[str, Any]]  # how the runner reports a candidate's failure
    _ref_error: Callable[[str, BaseException], dict[str, Any]]  # and a reference's

    def _timing_target(self, req: dict, bufs: list[bytes]) -> tuple[list[list[Any]], Any]:
        """The input sets and the model a `time` request names (None: not compiled here)."""
        if "key" in req:  # the reference times on the input sets it drew itself
            sets = [list(inputs) for inputs, _ in self.kept[str(req["key"])]]
        else:
            sets = [list(s) for s in wire.decode_value(req["sets"], bufs)]
        return sets, self.compiled if req.get("variant") == "compiled" else self.model

    def op_time(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """GPU: `calls` timed calls cycling over the given input sets (after the untimed `prime` pass when
        asked), every output kept for `timed_outputs`; the answer carries the times only."""
        from .timing import Bench

        if self.bench is None:
            self.bench = Bench()
        # The last block's outputs go now, not on a `release` of their own: one round trip less per block, and the
        # allocator hands their memory to this block's calls (the referee releases early when sets are large).
        self.kept.pop("timed", None)
        sets, model = self._timing_target(req, bufs)
        if model is None:
            return {"ref_error": "the reference has not been compiled in this process"}
        mode = req.get("mode", "strict")
        precision.pin_tf32() if mode == "tf32" else precision.pin_strict()
        try:
            with torch.no_grad():
                warmup = int(req.get("warmup", 1))
                if req.get("prime"):
                    self._prime(model, sets, int(req["calls"]))
                    warmup = 0  # the prime pass warmed up, on inputs the timed calls never see
                times, outs = self.bench.block(lambda i: model(*sets[i % len(sets)]), int(req["calls"]), warmup)
        except BaseException as exc:  # noqa: BLE001
            precision.pin_strict()
            return self._error(exc, STAGE_RUN) if self.role == "cand" else self._ref_error("forward (timed)", exc)
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

    def _prime(self, model: Any, sets: list[list[Any]], calls: int) -> None:
        """The block's calls once untimed, every output kept until the last, then dropped; then "primed" to
        the referee, whose wall clock starts there. The caching allocator then holds the memory the timed
        calls' kept outputs need: without this a fresh process (every candidate runs in one) paid cudaMalloc
        inside its timed calls, 2-4x its kernels' time (bench/timing_agreement.py). The prime calls see zeros
        shaped like the first set, never the timed inputs: an output cache (keyed on pointers or values)
        filled here cannot answer a timed call. A model that cannot take zeros gets copies of the first set
        (other pointers; only the calls given that set could then match a cache keyed on values)."""
        try:
            stand_in = [torch.zeros_like(v) if isinstance(v, torch.Tensor) else v for v in sets[0]]
            kept = [model(*stand_in) for _ in range(calls)]
        except Exception:  # noqa: BLE001 - zeros a task cannot take (a sampling op): copies of the first set
            stand_in = [v.clone() if isinstance(v, torch.Tensor) else v for v in sets[0]]
            kept = [model(*stand_in) for _ in range(calls)]
        torch.cuda.synchronize()
        del kept, stand_in
        wire.send(self.conn, {"primed": True})
