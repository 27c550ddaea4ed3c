"""Parameters that matter: parameters and buffers still at an initial constant, perturbed alike in both models
after construction.

Answers a candidate that ignores a parameter or buffer because it sits at its initial constant: LayerNorm's
weight and bias (ones and zeros), BatchNorm's running statistics (zeros and ones), an RMSNorm scale built with
`torch.ones`, a bias built with `torch.zeros`. After both models are built under the same seed, every floating
parameter or buffer whose elements all hold one value is changed in both: multiplied elementwise by
U(0.5, 1.5) (a positive constant stays positive), or, where all zeros, replaced by U(-0.5, 0.5). Tensors drawn
at random (a Linear's weight) already carry information and stay as built, so a candidate that derives state
from them at construction (a weight summed once into a buffer) is judged on what it computes; structured
buffers (a causal mask, a rotary table) stay too, since a kernel that recomputes them is honest.

"Alike" needs the line-up: a candidate tensor is perturbed when the reference has one of the same name and
shape, or else exactly one of the same shape and bytes (a candidate that names its layers otherwise); its
noise is drawn from a generator seeded by the evaluation's seed and the reference tensor's name, on the
models' device. Tensors without a partner stay as built in both models. The result says what ran
(`fidelity.perturbation`).

The runner side (`state_index`, `perturb`) runs in each runner on its own model; `lineup` runs in the referee.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import torch

from ..tensor_digest import tensor_digest

if TYPE_CHECKING:  # the runner imports this module too: no referee types at run time
    from .context import Judging

KIND = "x*U(0.5,1.5), zeros->U(-0.5,0.5)"


def _tensors(model: Any) -> dict[str, torch.Tensor]:
    """Floating parameters and buffers that one constant fills, by state-dict name."""
    if not isinstance(model, torch.nn.Module):
        return {}
    out = {}
    for name, t in model.state_dict(keep_vars=True).items():
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() > 0 and not t.is_meta:
            if bool((t == t.reshape(-1)[0]).all()):
                out[name] = t
    return out


def state_index(model: Any) -> list[list[Any]]:
    """[name, shape, digest] of each tensor that may be perturbed (runner side)."""
    return [[name, list(t.shape), "%x:%x" % tensor_digest(t.detach())] for name, t in _tensors(model).items()]


def perturb(model: Any, seed: int, keys: dict[str, str]) -> int:
    """Perturb each tensor named in `keys` (own name -> the reference name its noise is drawn from); the count."""
    tensors, done = _tensors(model), 0
    with torch.no_grad():
        for name, key in keys.items():
            if name not in tensors:
                continue
            t = tensors[name]
            gen = torch.Generator(device=t.device)
            gen.manual_seed(int.from_bytes(hashlib.sha256(f"{seed}:{key}".encode()).digest()[:7], "little"))
            u = torch.rand(t.shape, generator=gen, device=t.device, dtype=torch.float32).to(t.dtype) + 0.5
            t.copy_(u - 1.0 if not bool(t.any()) else t * u)
            done += 1
    return done


def lineup(ref_index: Any, cand_index: Any) -> tuple[dict[str, str], dict[str, str], dict[str, Any]]:
    """The reference's keys, the candidate's (its name -> the reference's), and what the result reports."""
    ref = {str(e[0]): (tuple(e[1]), str(e[2])) for e in ref_index or [] if isinstance(e, list) and len(e) == 3}
    cand = {str(e[0]): (tuple(e[1]), str(e[2])) for e in cand_index or [] if isinstance(e, list) and len(e) == 3}
    keys: dict[str, str] = {n: n for n in cand if n in ref and cand[n][0] == ref[n][0]}
    by_name = len(keys)
    free = {n: v for n, v in ref.items() if n not in keys.values()}
    for name, spec in cand.items():
        if name in keys:
            continue
        same = [r for r, v in free.items() if v == spec]
        if len(same) == 1:
            keys[name] = same[0]
            del free[same[0]]
    used = set(keys.values())
    report = {"kind": KIND, "tensors": len(keys), "by_name": by_name, "by_value": len(keys) - by_name,
              "reference_only": sorted(set(ref) - used)[:8]}
    return {r: r for r in used}, keys, report


def perturb_both(ev: Judging, seed: int, ref_index: Any, cand_index: Any, report_as: str = "perturbation") -> None:
    """Referee side, right after both builds: line the two models' tensors up and perturb them in both
    runners; the report goes to `ev.fidelity["perturbation"]`."""
    ref_keys, cand_keys, report = lineup(ref_index, cand_index)
    if cand_keys:
        ev.referee.call_ref(ev.ref, {"op": "perturb", "seed": seed, "keys": ref_keys}, ev.deadline,
                            "perturbing the reference's parameters")
        reply, _ = ev.cand_call({"op": "perturb", "seed": seed, "keys": cand_keys})
        if reply.get("perturbed") != len(cand_keys):
            report["candidate_perturbed"] = reply.get("perturbed") if isinstance(reply.get("perturbed"), int) else 0
    ev.fidelity[report_as] = report
