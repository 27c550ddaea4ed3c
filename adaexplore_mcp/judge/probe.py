"""Probing a task's reference in a worker: does it build and run, what are its shapes, is it degenerate?

Degenerate (JUDGE.md): a constant tensor (zeros, or the output's mean) would pass the tolerance, or the
output does not move when the inputs do. On such a task a "pass" says little, so every result says so.
Under the CPU interpreter with small_shapes, numerics come from the small run and the full-size specs
from a run on torch's `meta` device (shapes only, no data).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..config import JudgeLimits
from ..tasks.format import import_file
from .compare import as_tensors, compare
from .reference import ReferenceFailure, TaskCache, fresh_seed

SEEDS = 3


def _specs(values: list[Any]) -> list[dict]:
    return [{"shape": list(v.shape), "dtype": str(v.dtype).removeprefix("torch.")}
            for v in values if isinstance(v, torch.Tensor)]


def meta_specs(task: dict) -> tuple[list[dict], list[dict]]:
    """Full-size input/output specs without allocating anything (torch meta tensors)."""
    module = import_file(task["module"] + "_meta", Path(task["path"]))
    with torch.device("meta"):
        model = module.Model(*module.get_init_inputs())
        inputs = list(module.get_inputs())
        with torch.no_grad():
            outputs = as_tensors(model(*inputs))
    return _specs(inputs), _specs(outputs)


def degenerate_reasons(runs: list[list[Any]], limits: JudgeLimits) -> list[str]:
    """Why a constant or input-independent output would pass; `runs` holds each seed's outputs."""
    reasons: list[str] = []
    for i in range(len(runs[0])):
        outs = [r[i].detach().double() for r in runs if isinstance(r[i], torch.Tensor)]
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
            compare(runs[0][i], r[i], 0, limits.atol, limits.rtol, limits.max_rel_norm) is None for r in runs[1:]
        ):
            reasons.append(f"{label}: does not change when the inputs change (same result on {len(runs)} seeds)")
    return reasons


def probe(req: dict, tasks: TaskCache) -> dict[str, Any]:
    limits = JudgeLimits(**req["limits"])
    warnings: list[str] = []
    try:
        loaded = tasks.get(req["task"])
        runs, first_inputs = [], None
        for _ in range(SEEDS):
            inputs = tasks.inputs(loaded, fresh_seed())
            first_inputs = first_inputs if first_inputs is not None else inputs
            out = as_tensors(tasks.run(loaded, inputs))
            if not all(isinstance(o, torch.Tensor) for o in out):
                raise ReferenceFailure("the reference's forward must return a tensor or a tuple/list of tensors, "
                                       f"got {[type(o).__name__ for o in out]}")
            runs.append(out)
    except ReferenceFailure as exc:
        return {"ok": False, "error": str(exc)}
    inputs_spec, outputs_spec = _specs(first_inputs or []), _specs(runs[0])
    if any(not bool(torch.isfinite(o).all()) for o in runs[0] if o.is_floating_point()):
        warnings.append("the reference output contains NaN or inf on random inputs")
    if req["task"]["shapes"]:
        try:
            inputs_spec, outputs_spec = meta_specs(req["task"])
            warnings.append("checked at small_shapes under the CPU interpreter; the shapes reported are the "
                            "full-size ones, computed on torch's meta device")
        except Exception as exc:  # noqa: BLE001 - some ops lack meta kernels
            warnings.append(f"checked at small_shapes; full-size shapes could not be computed on the meta device "
                            f"({type(exc).__name__}), so the shapes reported are the small ones")
    reasons = degenerate_reasons(runs, limits)
    return {"ok": True, "inputs": inputs_spec, "outputs": outputs_spec, "degenerate": bool(reasons),
            "degenerate_reasons": reasons, "warnings": warnings}
