"""Probing a task's reference: does it build and run, what are its shapes, is it degenerate, is it
deterministic? Decided in the referee from outputs the reference runner lends it.

Degenerate (a constant tensor, zeros or the output's mean, would pass the tolerance, or the output
does not move when the inputs do): a "pass" there says little, so every result says so.
Not deterministic (two runs on identical inputs differ: dropout in training mode, atomics): said
when the task is created, with the comparison policy every result then states.
Under the CPU interpreter with small_shapes, numerics come from the small run and the full-size
specs from a run on torch's `meta` device (shapes only, no data), done in the reference's runner.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch
from pydantic import ValidationError

from ..config import JudgeLimits
from ..models import TaskCost
from ..errors import safe_str
from . import wire
from .compare import CHUNK, as_tensors, compare, tensor_specs
from .evaluation import fresh_seed
from .referee import Referee, ReferenceFailure, oom_summary

SEEDS = 3
NONDETERMINISTIC = ("the reference is not deterministic: two runs on identical inputs differ (max abs difference "
                    "{diff:.3g}; dropout in training mode? atomics?). Candidates are compared against one run, so a "
                    "mismatch near that size may be the reference's own noise")


SAMPLE = 1 << 22  # elements of each output the degeneracy checks look at (a 6 GiB output is sampled)


def _sample(outs: list[torch.Tensor]) -> list[torch.Tensor]:
    """The same elements of each run's output, in float64: all of them, or a fixed random sample."""
    n = outs[0].numel()
    if n <= SAMPLE:
        return [o.detach().double() for o in outs]
    idx = torch.randint(0, n, (SAMPLE,), device=outs[0].device, generator=None)
    return [o.detach().reshape(-1)[idx].double() for o in outs]


def degenerate_reasons(runs: list[list[Any]], limits: JudgeLimits) -> list[str]:
    """Why a constant or input-independent output would pass; `runs` holds each seed's outputs."""
    reasons: list[str] = []
    for i in range(len(runs[0])):
        tensors = [r[i] for r in runs if isinstance(r[i], torch.Tensor)]
        outs = _sample(tensors) if tensors and tensors[0].is_floating_point() else tensors
        if not outs or not outs[0].is_floating_point() or outs[0].numel() == 0:
            continue
        label = f"output {i}"
        if all(bool((o.abs() <= limits.atol).all()) for o in outs):
            reasons.append(f"{label}: an all-zeros tensor would pass (|output| <= atol={limits.atol:g} everywhere)")
            continue
        if all(bool(((o - o.mean()).abs() <= limits.atol + limits.rtol * o.abs()).all()) for o in outs):
            reasons.append(f"{label}: a constant tensor (the output mean, about {float(outs[0].mean()):.4g}) would pass")
            continue
        if len(runs) > 1 and all(
            compare(outs[0], o, 0, limits.atol, limits.rtol, limits.max_rel_norm) is None for o in outs[1:]
        ):
            reasons.append(f"{label}: does not change when the inputs change (same result on {len(runs)} seeds)")
    return reasons


def _max_diff(a: list[Any], b: list[Any]) -> float:
    worst = 0.0
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.shape == y.shape and x.numel():
            fx, fy = x.reshape(-1), y.reshape(-1)
            for i in range(0, fx.numel(), CHUNK):
                d = (fx[i:i + CHUNK].double() - fy[i:i + CHUNK].double()).abs()
                worst = max(worst, float(torch.nan_to_num(d, nan=0.0).max()))
    return worst


def probe(referee: Referee, req: dict) -> dict[str, Any]:
    limits = JudgeLimits(**req["limits"])
    deadline = time.monotonic() + float(req["timeout_s"])
    warnings: list[str] = []
    recycle: dict[str, Any] = {}  # after any out-of-memory this referee is replaced once it has answered
    for attempt in range(2):
        try:
            return {**_probe(referee, req, limits, deadline, warnings), **recycle}
        except (ReferenceFailure, torch.OutOfMemoryError) as exc:
            oom = isinstance(exc, torch.OutOfMemoryError) or exc.oom
            if oom:
                recycle = {"recycle": True}
            if oom and attempt == 0 and referee.evict_all_but(None):
                warnings.append("the GPU ran out of memory; cached references were released and the probe retried")
                continue
            if isinstance(exc, torch.OutOfMemoryError):
                return {"ok": False, "error": f"the GPU ran out of memory while checking the reference's outputs "
                        f"({oom_summary(exc)})", **recycle}
            return {"ok": False, "error": str(exc), **recycle}
        except (KeyError, TypeError, IndexError, AttributeError, ValueError, wire.WireError) as exc:
            referee.forget(req["task"])  # its channel can no longer be trusted to be in step
            return {"ok": False, "error": f"the reference's process answered malformed data ({type(exc).__name__}: "
                    f"{safe_str(exc)[:200]}); does the task's code write to its own file descriptors?"}
    return {"ok": False, "error": "unreachable"}


def _probe(referee: Referee, req: dict, limits: JudgeLimits, deadline: float, warnings: list[str]) -> dict[str, Any]:
    ref = referee.reference(req["task"], deadline)
    referee.call_ref(ref, {"op": "build", "seed": fresh_seed()}, deadline, "building the reference")
    reply, bufs = referee.call_ref(ref, {"op": "make", "seeds": [fresh_seed() for _ in range(SEEDS)], "key": "probe"},
                                   deadline, "running the reference")
    opened: dict = {}  # one opening per CUDA IPC share of the message (each opening releases one count)
    sets = [(list(wire.decode_value(s["inputs"], bufs, opened=opened)),
             as_tensors(wire.decode_value(s["output"], bufs, opened=opened))) for s in reply["sets"]]
    runs = [o for _, o in sets]
    if not all(isinstance(o, torch.Tensor) for o in runs[0]):
        raise ReferenceFailure("the reference's forward must return a tensor or a tuple/list of tensors, "
                               f"got {[type(o).__name__ for o in runs[0]]}")
    rerun, rbufs = referee.call_ref(ref, {"op": "rerun", "key": "probe"}, deadline, "running the reference again")
    reopened: dict = {}
    again = [as_tensors(wire.decode_value(o, rbufs, opened=reopened)) for o in rerun["outputs"]]
    diff = max(_max_diff(a, b) for a, b in zip(runs, again))
    deterministic = diff == 0.0
    if not deterministic:
        warnings.append(NONDETERMINISTIC.format(diff=diff))
    inputs_spec, outputs_spec = tensor_specs(sets[0][0]), tensor_specs(runs[0])
    if any(not bool(torch.isfinite(s).all()) for s in _sample([o for o in runs[0] if o.is_floating_point()] or [])):
        warnings.append("the reference output contains NaN or inf on random inputs")
    reasons = degenerate_reasons(runs, limits)
    if req["task"]["shapes"]:
        meta, _ = referee.call_ref(ref, {"op": "meta"}, deadline, "computing full-size shapes")
        if "error" in meta:
            warnings.append(f"checked at small_shapes; full-size shapes could not be computed on the meta device "
                            f"({str(meta['error'])[:60]}), so the shapes reported are the small ones")
        else:
            inputs_spec, outputs_spec = meta["inputs"], meta["outputs"]
            warnings.append("checked at small_shapes under the CPU interpreter; the shapes reported are the "
                            "full-size ones, computed on torch's meta device")
    del sets, runs, again
    released, _ = referee.call_ref(ref, {"op": "release"}, deadline, "releasing the reference")
    referee.account(ref, int(released.get("reserved", 0)))
    elements = sum(math.prod(s["shape"]) for s in inputs_spec)
    return {"ok": True, "inputs": inputs_spec, "outputs": outputs_spec, "degenerate": bool(reasons),
            "degenerate_reasons": reasons, "warnings": warnings, "deterministic": deterministic,
            "input_elements": elements, **_cost(referee, ref, deadline)}


def _cost(referee: Referee, ref: Any, deadline: float) -> dict[str, Any]:
    """The task's minimum bytes and FLOPs at full size (the roofline of every timed result), counted by the
    reference's runner, which keeps them for the evaluations it serves; never a reason to refuse a task."""
    try:
        reply, _ = referee.call_ref(ref, {"op": "cost"}, deadline, "counting the reference's bytes and FLOPs")
    except ReferenceFailure as exc:
        return {"cost_unavailable": str(exc)[:300]}
    try:
        return {"cost": TaskCost.model_validate(reply["cost"]).model_dump()}
    except (KeyError, ValidationError):
        pass
    return {"cost_unavailable": str(reply.get("cost_unavailable") or "not counted")[:300]}
