"""Output comparison and the input/output integrity checks. Runs in the worker, on the device.

Returns plain dicts shaped like MismatchDetail / RejectDetail (the parent validates them), or None.
Comparison is done in float64 so the judge's own arithmetic never decides a borderline case.
"""

from __future__ import annotations

from typing import Any

import torch


def as_tensors(value: Any) -> list[Any]:
    """Outputs may be one tensor or a tuple/list of them; scalars are compared as 0-d tensors."""
    items = list(value) if isinstance(value, (tuple, list)) else [value]
    return [torch.as_tensor(x) if isinstance(x, (int, float, bool)) else x for x in items]


MAX_NESTING = 4  # lists of lists of tensors in a task's inputs


def flat_tensors(value: Any, depth: int = 0) -> list[torch.Tensor]:
    """Every tensor in a value, through nested lists and tuples: a task's `get_inputs()` may hold a list of
    tensors, and what is inside it is sized, checked for mutation and aliasing like the rest (a nested input was
    counted as no bytes, and written in place unseen)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)) and depth < MAX_NESTING:
        return [t for v in value for t in flat_tensors(v, depth + 1)]
    return []


def cloned(value: Any, depth: int = 0) -> Any:
    """A copy of a tensor, or of every tensor in a list or tuple of them; anything else as it is."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if type(value) in (list, tuple) and depth < MAX_NESTING:
        return type(value)(cloned(v, depth + 1) for v in value)
    return value


def nbytes(value: Any) -> int:
    """Bytes of the tensors in a value (one tensor, or lists and tuples of them)."""
    return sum(t.numel() * t.element_size() for t in flat_tensors(value))


def tensor_specs(values: list[Any]) -> list[dict]:
    """Shape and dtype of each tensor, as TaskProbe reports them."""
    return [{"shape": list(v.shape), "dtype": str(v.dtype).removeprefix("torch.")}
            for v in values if isinstance(v, torch.Tensor)]


def _spec(t: Any) -> str:
    if isinstance(t, torch.Tensor):
        return f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)} on {t.device.type}"
    return type(t).__name__


def compare(ref: Any, out: Any, trial: int, atol: float, rtol: float, max_rel_norm: float) -> dict | None:
    """First difference between reference and candidate outputs, as a MismatchDetail dict."""
    refs, outs = as_tensors(ref), as_tensors(out)
    if len(refs) != len(outs):
        return {"output_index": 0, "trial": trial, "shape": [], "reason": "count",
                "expected_spec": f"{len(refs)} output(s)", "got_spec": f"{len(outs)} output(s)"}
    for i, (r, o) in enumerate(zip(refs, outs)):
        found = _compare_one(r, o, i, trial, atol, rtol, max_rel_norm)
        if found is not None:
            return found
    return None


CHUNK = 1 << 24  # elements compared at once: a 6 GiB output is never copied to float64 whole


def _compare_one(r: Any, o: Any, index: int, trial: int, atol: float, rtol: float, max_rel_norm: float) -> dict | None:
    base = {"output_index": index, "trial": trial, "shape": list(getattr(r, "shape", []))}
    if not isinstance(o, torch.Tensor):
        return {**base, "reason": "type", "expected_spec": _spec(r), "got_spec": _spec(o)}
    for reason, same in (("shape", r.shape == o.shape), ("dtype", r.dtype == o.dtype), ("device", r.device.type == o.device.type)):
        if not same:
            return {**base, "reason": reason, "expected_spec": _spec(r), "got_spec": _spec(o)}
    if r.numel() == 0:
        return None
    if r.is_complex():  # both parts compared (a plain float64 copy would drop the imaginary one)
        return _compare_one(torch.view_as_real(r.resolve_conj()), torch.view_as_real(o.resolve_conj()), index, trial,
                            atol, rtol, max_rel_norm)
    if not r.is_floating_point():
        return _compare_exact(r, o, base)
    acc = _Scan(atol, rtol)
    rf, of = r.detach().reshape(-1), o.detach().reshape(-1)
    for start in range(0, rf.numel(), CHUNK):
        acc.add(start, rf[start:start + CHUNK].double(), of[start:start + CHUNK].double())
    where = lambda flat: _where(flat, r.shape, rf, of)  # noqa: E731
    n = r.numel()
    if acc.bad:
        return {**base, "reason": "non_finite", **where(acc.first_bad), "mismatched_fraction": acc.bad / n}
    rel_norm = acc.norm_err / max(acc.norm_ref, 1e-30)
    stats = {"max_abs_error": acc.max_abs, "max_rel_error": acc.max_rel, "rel_norm_error": rel_norm}
    if acc.over:
        return {**base, "reason": "values", **stats, **where(acc.worst_over[1]), "mismatched_fraction": acc.over / n}
    # Norm check on top of the elementwise one: an error that rides the atol limit everywhere (a
    # systematic bias) fails, a few elements near the limit do not. Allowed: max_rel_norm of the
    # reference's norm, plus an RMS error of half of atol.
    if acc.norm_err > max_rel_norm * acc.norm_ref + 0.5 * atol * n ** 0.5:
        return {**base, "reason": "norm", **stats, **where(acc.worst_err[1])}
    return None


def _compare_exact(r: torch.Tensor, o: torch.Tensor, base: dict) -> dict | None:
    """Integer and bool outputs (indices, counts, masks) must be equal: a tolerance would pass an argmax one
    index off, and float64 rounds integers beyond 2**53."""
    rf, of = r.detach().reshape(-1), o.detach().reshape(-1)
    wrong, first = 0, -1
    for start in range(0, rf.numel(), CHUNK):
        ne = rf[start:start + CHUNK] != of[start:start + CHUNK]
        count = int(ne.sum())
        if count and first < 0:
            first = start + int(torch.argmax(ne.to(torch.uint8)))
        wrong += count
    if not wrong:
        return None
    return {**base, "reason": "values", "mismatched_fraction": wrong / rf.numel(), **_where(first, r.shape, rf, of)}


class _Scan:
    """Running totals of one output's comparison, chunk by chunk (float64 per chunk)."""

    def __init__(self, atol: float, rtol: float) -> None:
        self.atol, self.rtol = atol, rtol
        self.bad = self.over = 0
        self.first_bad = 0
        self.max_abs = self.max_rel = 0.0
        self.sq_err = self.sq_ref = 0.0
        self.worst_over = (-float("inf"), 0)
        self.worst_err = (-float("inf"), 0)

    def add(self, start: int, rd: torch.Tensor, od: torch.Tensor) -> None:
        """Fold one chunk in. Every statistic is computed on the tensors' device and read back in a single
        transfer: one device round trip per chunk, not ten (on the H200 the ten cost 2 ms per output
        compared, 80-90 ms of an evaluation's 1.3 s)."""
        r_fin, o_fin = torch.isfinite(rd), torch.isfinite(od)
        bad = r_fin != o_fin
        bad |= ~r_fin & ~o_fin & ~((rd == od) | (rd.isnan() & od.isnan()))
        rd, od = torch.where(r_fin, rd, 0.0), torch.where(r_fin, od, 0.0)
        err = (od - rd).abs()
        margin = err - (self.atol + self.rtol * rd.abs())
        k_over, k_err = torch.argmax(margin), torch.argmax(err)
        stats = torch.stack([bad.sum().double(), torch.argmax(bad.to(torch.uint8)).double(),
                             (margin > 0).sum().double(), err[k_err], (err / rd.abs().clamp_min(1e-12)).max(),
                             (err * err).sum(), (rd * rd).sum(), k_over.double(), margin[k_over], k_err.double()])
        nbad, first_bad, over, max_abs, max_rel, sq_err, sq_ref, i_over, worst_margin, i_err = stats.tolist()
        if nbad:
            if not self.bad:
                self.first_bad = start + int(first_bad)
            self.bad += int(nbad)
            return
        self.over += int(over)
        self.max_abs = max(self.max_abs, max_abs)
        self.max_rel = max(self.max_rel, max_rel)
        self.sq_err += sq_err
        self.sq_ref += sq_ref
        for name, score, k in (("worst_over", worst_margin, i_over), ("worst_err", max_abs, i_err)):
            if score > getattr(self, name)[0]:
                setattr(self, name, (score, start + int(k)))

    @property
    def norm_err(self) -> float:
        return self.sq_err ** 0.5

    @property
    def norm_ref(self) -> float:
        return self.sq_ref ** 0.5


def _where(flat: int, shape: torch.Size, rf: torch.Tensor, of: torch.Tensor) -> dict:
    return {"worst_index": unravel(flat, list(shape)), "expected": float(rf[flat].double()),
            "got": float(of[flat].double())}


def unravel(flat: int, shape: list[int]) -> list[int]:
    """The index of element `flat` of a row-major tensor of `shape`. By hand: `torch.unravel_index` imports
    sympy on first use, 0.46 s of the first mismatch a judge process reports."""
    index = []
    for size in reversed(shape):
        flat, i = divmod(flat, max(size, 1))
        index.append(i)
    return index[::-1]


def same_values(a: Any, b: Any) -> bool:
    """Bitwise-equal tensors (NaN equal to NaN): used to check the candidate left its inputs alone."""
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        return True
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        fa, fb = a.reshape(-1), b.reshape(-1)
        return all(bool(((x == y) | (x.isnan() & y.isnan())).all())
                   for x, y in ((fa[i:i + CHUNK], fb[i:i + CHUNK]) for i in range(0, fa.numel(), CHUNK)))
    return bool(torch.equal(a, b))


def mutated_input(originals: list[Any], after: list[Any]) -> int | None:
    """The index of the first input whose values (or those of a tensor inside it) changed, or None. An input
    missing from `after` counts as changed: on the CPU `after` is the runner's own copies, and one that sent back
    an empty list had nothing compared (with the runner's self-checks patched)."""
    for i, (a, b) in enumerate(zip(originals, after)):
        fa, fb = flat_tensors(a), flat_tensors(b)
        if len(fa) != len(fb) or not all(same_values(x, y) for x, y in zip(fa, fb)):
            return i
    return None if len(after) >= len(originals) else len(after)


ALIASED = ("an output shares storage with an input; write results to a new tensor (where the task returns an input "
           "as it is, return `x.clone()`: a caller that changes one must not change the other)")


def aliased_output(out: Any, inputs: list[Any]) -> tuple[int, int] | None:
    """(output index, input index) when an output shares storage with an input."""
    ptrs = {}
    for j, x in enumerate(inputs):
        for t in flat_tensors(x):
            if t.numel():
                ptrs[t.untyped_storage().data_ptr()] = j
    for i, o in enumerate(as_tensors(out)):
        if isinstance(o, torch.Tensor) and o.numel():
            j = ptrs.get(o.untyped_storage().data_ptr())
            if j is not None:
                return i, j
    return None


REUSED = ("calls {0} and {1} of one request returned their outputs in the same memory (a buffer kept on the module "
          "and written again by every call?): each call must return new tensors, since the judge keeps several calls' "
          "results to compare them, as any caller may")


UNSENDABLE = "an output cannot be sent to the judge as a plain dense tensor (nested, sparse?)"


class Unsendable(Exception):
    """An output the runner will not send, with the reason (its message)."""


def refuse_shared(results: list[Any]) -> None:
    """Unsendable when two calls' outputs share storage: the later call overwrote the earlier's result (fidelity, it
    was judged a mismatch with no word of why)."""
    seen: dict[int, int] = {}
    for k, result in enumerate(results):
        mine = {o.untyped_storage().data_ptr() for o in as_tensors(result) if isinstance(o, torch.Tensor) and o.numel()}
        for ptr in mine:
            if ptr in seen:
                raise Unsendable(REUSED.format(seen[ptr], k))
        seen.update((ptr, k) for ptr in mine)


def unsendable_reason(exc: BaseException) -> str:
    """What the verdict says of outputs a runner would not or could not send."""
    return (str(exc) if isinstance(exc, Unsendable) else f"{UNSENDABLE}: {type(exc).__name__}: {exc}")[:400]


# Tolerance by the reference output's dtype: float32 keeps the configured 1e-2; half precision rounds
# at about 1e-3 (fp16) and 4e-3 (bf16) per operation, so a correct kernel that accumulates in another
# order lands further away. Always stated in the result.
LOW_PRECISION_TOLERANCE = {torch.float16: 5e-2, torch.bfloat16: 1e-1}


def tolerance_for(dtype: torch.dtype, atol: float, rtol: float) -> tuple[float, float]:
    floor = LOW_PRECISION_TOLERANCE.get(dtype)
    return (max(atol, floor), max(rtol, floor)) if floor is not None else (atol, rtol)
