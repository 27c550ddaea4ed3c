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
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from pydantic import ValidationError

from ..config import JudgeLimits
from ..models import TaskCost
from ..errors import safe_str
from . import wire
from .compare import CHUNK, as_tensors, compare, tensor_specs
from .checks.second_shapes import CANNOT_MOVE, second_reference
from .evaluation import fresh_seed
from .result import Control, RefereeResult
from .referee import Referee, ReferenceFailure, oom_summary

SEEDS = 3
NONDETERMINISTIC = ("the reference is not deterministic: two runs on identical inputs differ (max abs difference "
                    "{diff:.3g}; dropout in training mode? atomics?). Candidates are compared against one run, so a "
                    "mismatch near that size may be the reference's own noise")


SAMPLE = 1 << 22  # elements of each output the degeneracy checks look at (a 6 GiB output is sampled)


def _host_number(value: Any) -> bool:
    return isinstance(value, (bool, int, float, complex))


def _numeric(t: torch.Tensor) -> torch.Tensor:
    """`t` flattened as real numbers: a complex tensor as its real and imaginary parts (`.double()` alone would
    drop the imaginary part, and with it any difference there)."""
    t = t.detach()
    return torch.view_as_real(t.resolve_conj()).reshape(-1) if t.is_complex() else t.reshape(-1)


def _inexact(t: torch.Tensor) -> bool:
    """Compared within a tolerance (floating or complex); integer and bool outputs are checked exactly."""
    return t.is_floating_point() or t.is_complex()


def _sample(outs: list[torch.Tensor]) -> list[torch.Tensor]:
    """The same elements of each run's output (same shape), in float64: all of them, or a fixed random sample."""
    flat = [_numeric(o) for o in outs]
    if not flat or flat[0].numel() <= SAMPLE:
        return [f.double() for f in flat]
    idx = torch.randint(0, flat[0].numel(), (SAMPLE,), device=flat[0].device, generator=None)
    return [f[idx].double() for f in flat]


def degenerate_outputs(runs: list[list[Any]], limits: JudgeLimits) -> dict[int, str]:
    """Each output a constant or input-independent value would pass, with why; `runs` holds each seed's outputs.
    One constant for every seed, not one per seed: a scalar (a loss) is one value in each run, yet changes with
    the inputs, and flagged it switched the work checks off for every reduction-to-scalar task."""
    found: dict[int, str] = {}
    for i in range(len(runs[0])):
        tensors = [r[i] for r in runs if isinstance(r[i], torch.Tensor)]
        if not tensors or tensors[0].numel() == 0 or any(t.shape != tensors[0].shape for t in tensors):
            continue
        if not _inexact(tensors[0]):
            found.update({i: why for why in _exact_reasons(tensors)[:1]})
            continue
        outs = _sample(tensors)
        constant = outs[0].mean()
        if all(bool((o.abs() <= limits.atol).all()) for o in outs):
            found[i] = f"an all-zeros tensor would pass (|output| <= atol={limits.atol:g} everywhere)"
        elif all(bool(((o - constant).abs() <= limits.atol + limits.rtol * o.abs()).all()) for o in outs):
            found[i] = f"a constant tensor (about {float(constant):.4g}) would pass on every seed"
        elif len(runs) > 1 and all(
            compare(outs[0], o, 0, limits.atol, limits.rtol, limits.max_rel_norm) is None for o in outs[1:]
        ):
            found[i] = f"does not change when the inputs change (same result on {len(runs)} seeds)"
    return found


def _exact_reasons(outs: list[torch.Tensor]) -> list[str]:
    """Integer and bool outputs (argmax, masks): a wrong element is wrong, so only an exact match passes, and
    the output is degenerate when one value everywhere, or one result for every seed, would match."""
    first = outs[0].reshape(-1)[:1]
    if all(bool((o == first).all()) for o in outs):
        return [f"a constant tensor (every element {first.item()}) would pass"]
    if len(outs) > 1 and all(torch.equal(outs[0], o) for o in outs[1:]):
        return [f"does not change when the inputs change (same result on {len(outs)} seeds)"]
    return []


def _max_diff(a: list[Any], b: list[Any]) -> float:
    worst = 0.0
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.shape == y.shape and x.numel():
            fx, fy = _numeric(x), _numeric(y)
            if not _inexact(x):  # exact: int64 as int64 (float64 rounds above 2**53), bool as 0/1
                fx, fy = fx.to(torch.int64), fy.to(torch.int64)
            for i in range(0, fx.numel(), CHUNK):
                d = (fx[i:i + CHUNK] - fy[i:i + CHUNK]).abs().double()
                worst = max(worst, float(torch.nan_to_num(d, nan=0.0).max()))
    return worst


class Malformed(Exception):
    """The reference's process answered something that does not decode: its channel is out of step."""


@contextmanager
def _answered(what: str) -> Iterator[None]:
    """Reading the reference's answer: a decoding failure is its process's fault (or an output dtype the
    wire cannot carry, said as such); a failure anywhere else in the probe is the judge's own."""
    try:
        yield
    except wire.WireError as exc:
        if safe_str(exc).startswith("unsupported dtype"):
            raise ReferenceFailure(f"unsupported {what} dtype: the reference's {what}s include a tensor of dtype "
                                   f"{safe_str(exc).removeprefix('unsupported dtype ')}; the judge carries "
                                   f"{', '.join(wire.DTYPES)}") from None
        raise Malformed(f"{type(exc).__name__}: {safe_str(exc)[:200]}") from exc
    except (KeyError, TypeError, IndexError, AttributeError, ValueError, ArithmeticError) as exc:
        raise Malformed(f"{type(exc).__name__}: {safe_str(exc)[:200]}") from exc


def probe(referee: Referee, req: dict) -> RefereeResult:
    """The task's probe (TaskProbe's fields); after any out-of-memory this referee is replaced once it has answered."""
    limits = JudgeLimits(**req["limits"])
    deadline = time.monotonic() + float(req["timeout_s"])
    warnings: list[str] = []
    recycle = False
    for attempt in range(2):
        try:
            return _answer(_probe(referee, req, limits, deadline, warnings), recycle)
        except (ReferenceFailure, torch.OutOfMemoryError) as exc:
            oom = isinstance(exc, torch.OutOfMemoryError) or (exc.oom and referee.memory_short(None))
            if oom:
                recycle = True
            if oom and attempt == 0 and referee.evict_all_but(None):
                warnings.append("the GPU ran out of memory; cached references were released and the probe retried")
                continue
            if isinstance(exc, torch.OutOfMemoryError):
                return _answer({"ok": False, "error": f"the GPU ran out of memory while checking the reference's "
                                f"outputs ({oom_summary(exc)})"}, recycle)
            return _answer({"ok": False, "error": str(exc)}, recycle)
        except Malformed as exc:
            referee.forget(req["task"])  # its channel can no longer be trusted to be in step
            return _answer({"ok": False, "error": f"the reference's process answered malformed data ({exc}); does "
                            "the task's code write to its own file descriptors?"})
        except Exception as exc:  # noqa: BLE001 - the probe's own bug: said as such, never blamed on the task
            referee.forget(req["task"])  # where the reference's runner stands is unknown
            return _answer({"ok": False, "error": f"the judge failed while checking the reference's outputs (a bug "
                            f"in the judge, not in the task): {type(exc).__name__}: {safe_str(exc)[:200]} at "
                            f"{_where(exc)}"})
    return _answer({"ok": False, "error": "unreachable"})


def _answer(fields: dict[str, Any], recycle: bool = False) -> RefereeResult:
    return RefereeResult(fields, Control(recycle=recycle))


def _probe(referee: Referee, req: dict, limits: JudgeLimits, deadline: float, warnings: list[str]) -> dict[str, Any]:
    ref = referee.reference(req["task"], deadline)
    referee.call_ref(ref, {"op": "build", "seed": fresh_seed()}, deadline, "building the reference")
    reply, bufs = referee.call_ref(ref, {"op": "make", "seeds": [fresh_seed() for _ in range(SEEDS)], "key": "probe"},
                                   deadline, "running the reference")
    opened: dict = {}  # one opening per CUDA IPC share of the message (each opening releases one count)
    sets = []
    with _answered("output"):
        answered = list(reply["sets"])
    if len(answered) != SEEDS:
        raise Malformed(f"{len(answered)} input sets for {SEEDS} seeds")
    for s in answered:
        with _answered("input"):
            inputs = list(wire.decode_value(s["inputs"], bufs, opened=opened))
        with _answered("output"):
            raw = wire.decode_value(s["output"], bufs, opened=opened)
            sets.append((inputs, as_tensors(raw)))
    numbers = [type(o).__name__ for o in (raw if isinstance(raw, (list, tuple)) else [raw]) if _host_number(o)]
    if numbers:  # its record would hold the number itself: no candidate's call could be replayed
        raise ReferenceFailure(f"the reference's forward returns a Python {numbers[0]}: return a tensor instead (a "
                               "0-d one: `(x * x).sum()` rather than `float((x * x).sum())`), so that a kernel's "
                               "result can be compared and its work checked")
    runs = [o for _, o in sets]
    if not all(isinstance(o, torch.Tensor) for o in runs[0]):
        raise ReferenceFailure("the reference's forward must return a tensor or a tuple/list of tensors, "
                               f"got {[type(o).__name__ for o in runs[0]]}")
    rerun, rbufs = referee.call_ref(ref, {"op": "rerun", "key": "probe"}, deadline, "running the reference again")
    reopened: dict = {}
    with _answered("output"):
        again = [as_tensors(wire.decode_value(o, rbufs, opened=reopened)) for o in rerun["outputs"]]
    diff = max(_max_diff(a, b) for a, b in zip(runs, again))
    deterministic = diff == 0.0
    if not deterministic:
        warnings.append(NONDETERMINISTIC.format(diff=diff))
    inputs_spec, outputs_spec = tensor_specs(sets[0][0]), tensor_specs(runs[0])
    if any(not bool(torch.isfinite(s).all()) for o in runs[0] if _inexact(o) for s in _sample([o])):
        warnings.append("the reference output contains NaN or inf on random inputs")
    degenerate = degenerate_outputs(runs, limits)
    if req["task"]["shapes"]:
        meta, _ = referee.call_ref(ref, {"op": "meta"}, deadline, "computing full-size shapes")
        if "error" in meta:
            warnings.append(f"checked at small_shapes; full-size shapes could not be computed on the meta device "
                            f"({str(meta['error'])[:60]}), so the shapes reported are the small ones")
        else:
            with _answered("output"):
                inputs_spec, outputs_spec = list(meta["inputs"]), list(meta["outputs"])
            warnings.append("checked at small_shapes under the CPU interpreter; the shapes reported are the "
                            "full-size ones, computed on torch's meta device")
    del sets, runs, again
    released, _ = referee.call_ref(ref, {"op": "release"}, deadline, "releasing the reference")
    with _answered("output"):
        referee.account(ref, int(released.get("reserved", 0)))
        elements = sum(math.prod(s["shape"]) for s in inputs_spec)
    if second_reference(referee, req["task"], deadline)[0] is None:  # checks/second_shapes.py
        warnings.append(CANNOT_MOVE)
    return {"ok": True, "inputs": inputs_spec, "outputs": outputs_spec, "degenerate": bool(degenerate),
            "degenerate_outputs": sorted(degenerate),
            "degenerate_reasons": [f"output {i}: {why}" for i, why in sorted(degenerate.items())],
            "warnings": warnings, "deterministic": deterministic,
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


def _where(exc: BaseException) -> str:
    """The innermost frame of a probe's own failure (file and line), so the bug report says where it is."""
    frames = traceback.extract_tb(exc.__traceback__)
    return f"{'/'.join(frames[-1].filename.split('/')[-2:])}:{frames[-1].lineno}" if frames else "an unknown place"
