"""Precision by what the output shows: the candidate's error against a float64 run of the reference, next to
the error the float32 reference itself makes.

Answers arithmetic below a float32 task's precision that no source check sees: bf16 stored by hand as the top
16 bits of an `int16` buffer, an int8 GEMM with per-channel scales, an fp16 cast hidden behind a helper. Such
kernels err by 8e-4 to 2e-3 relative, where honest float32 kernels of the same tasks stay under 6e-7, about
the reference's own error. On the first trial's inputs (a plain draw) the reference runner computes its
output again with a float64 copy of its model and inputs; the candidate is `below_fp32` when its relative
error (2-norm) exceeds both FACTOR times the reference's own and FLOOR. The result shows both errors
(`precision.measured`); the source and record checks stay for what a measurement cannot see (a switch that
changes nothing at these inputs, the interpreter's exact fp32 dot standing in for a GPU's TF32).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:  # the runner imports this module too: no referee types at run time
    from .context import Judging

FACTOR = 64.0
FLOOR = 2e-5
MAX_BYTES = 256 << 20  # a float64 copy of a model or of a set above this is not made (memory); the result says so


def float64_outputs(model: Any, inputs: list[Any]) -> Any:
    """Runner side: the model's outputs computed in float64 (a copy of it, and of its floating inputs)."""
    if isinstance(model, torch.nn.Module):
        size = sum(t.numel() * 8 for t in model.state_dict().values() if isinstance(t, torch.Tensor))
        if size > MAX_BYTES:
            return None
        model = copy.deepcopy(model).double()
    wide = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
    with torch.no_grad():
        return model(*wide)


def relative_error(got: torch.Tensor, exact: torch.Tensor) -> float | None:
    """||got - exact|| / ||exact|| in float64, None where the exact output is all zero or not finite."""
    exact = exact.double()
    scale = float(torch.linalg.vector_norm(exact))
    if not scale or scale != scale or scale == float("inf"):
        return None
    return float(torch.linalg.vector_norm(got.double() - exact)) / scale


def measure(ref32: list[torch.Tensor], cand: list[torch.Tensor], ref64: list[torch.Tensor]) -> dict[str, float] | None:
    """The largest relative errors over the floating outputs: {'candidate', 'reference'}; None if none."""
    worst: dict[str, float] | None = None
    for r, c, e in zip(ref32, cand, ref64):
        if not all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in (r, c, e)) or r.shape != e.shape \
                or c.shape != e.shape:
            continue
        errs = relative_error(c, e), relative_error(r, e)
        if errs[0] is None or errs[1] is None:
            continue
        if worst is None or errs[0] > worst["candidate"]:
            worst = {"candidate": errs[0], "reference": errs[1]}
    return worst


def below_fp32(errors: dict[str, float]) -> bool:
    return errors["candidate"] > max(FACTOR * errors["reference"], FLOOR)


def check_measured_precision(ev: Judging, ref_out: Any, got: Any) -> None:
    """Referee side, on the first trial (its set still kept by the reference runner under key 'trial'):
    ask for the float64 outputs, measure, and add a precision reason when far above the reference's error."""
    from ..compare import as_tensors
    from .. import wire

    if ev.out.task_dtype != "float32" or ev.req["task"].get("deterministic") is False or ev.out.measured:
        return  # measured once per evaluation (the copied line-up's first trial is the same set again)
    reply, bufs = ev.referee.call_ref(ev.ref, {"op": "float64", "key": "trial"}, ev.deadline,
                                      "running the reference in float64")
    if reply.get("skipped"):
        ev.fidelity["precision"] = f"not measured: {str(reply['skipped'])[:120]}"
        return
    exact = as_tensors(wire.decode_value(reply["outputs"], bufs))
    errors = measure(as_tensors(ref_out), as_tensors(got), exact)
    if errors is None:
        return
    ev.out.measured = {k: float(f"{v:.3g}") for k, v in errors.items()}
    if below_fp32(errors):
        ev.out.precision_reasons.append(
            f"measured: the output's error against a float64 reference is {errors['candidate']:.2g} (relative), "
            f"far above the float32 reference's own {errors['reference']:.2g}: computed below float32")
