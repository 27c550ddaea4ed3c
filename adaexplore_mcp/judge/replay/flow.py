"""The data flow of one replayed run, for the work policy (work_policy.py): which compute operators' results reach
each output, and which values PyTorch made without the candidate's kernels.

Kept per storage (views of one memory share what flows into it), in the replay's process where the candidate
cannot see it:

- a compute operator (one outside the policy's table) adds itself, with the elements it wrote, to what flows into
  the memory it writes; every operator passes on what flows into the tensors it reads; an allocation starts afresh;
- a launch of a candidate kernel passes what flows into all its tensor arguments (and into the values read back to
  the host that its scalar arguments are computed from: host_scalars.py) to the memory it changed: in the capture run the storages
  whose bytes changed, otherwise every argument's but the inputs' (which no run may change: inputs.py);
  that memory holds the kernel's work unless an argument over it now equals a value PyTorch made (a copy);
- a value a compute or layout operator made from memory no kernel changed is remembered by digest
  (tensor_digest.py), with the operator, for the exact-copy check; unless it is an input's or a parameter's value
  (an identity or a `.contiguous()` of one) or one constant.

Storage granularity over-approximates flow (a buffer PyTorch computed into in one part flows whole), so it can only
reject more, never hide an operator. What a kernel reads outside its arguments (pointer arithmetic from one
tensor to another's memory) is not followed; the exact-copy check and the substitution check still see a copy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from ..byte_values import canonical, storage_key, trivial
from ..compare import as_tensors, flat_tensors
from ..tensor_args import launch_tensors, read_by, written_by
from ..tensor_digest import tensor_digest
from ..work_policy import COPY_SOURCES, Finding, base_name, fallback, family


@dataclass(frozen=True)
class _Flow:
    """What flows into one storage: the compute steps (by their number in the run) and whether a kernel wrote it."""

    steps: frozenset[int] = field(default_factory=frozenset)
    kernel: bool = False

    def __or__(self, other: "_Flow") -> "_Flow":
        if not other.steps and not other.kernel:
            return self
        return _Flow(self.steps | other.steps, self.kernel or other.kernel)


_NOTHING = _Flow()


class WorkFlow:
    """Call `op(name, op, args, kwargs, result)` after each ATen operator of one run and `launch(args, kwargs,
    changed)` after each launch, then `findings(output)`. `inputs`: the run's inputs (never written); `constants`:
    the call's parameters and buffers."""

    def __init__(self, inputs: list[Any], constants: list[Any]) -> None:
        known = [t for t in flat_tensors([inputs, constants]) if isinstance(t, torch.Tensor)]
        self.inputs = {storage_key(t) for t in flat_tensors(inputs) if isinstance(t, torch.Tensor)}
        self.known = {tensor_digest(canonical(t)) for t in known if t.numel()}
        self.flows: dict[int, _Flow] = {}
        self.computed: list[tuple[str, int]] = []  # per compute step: (operator, elements it wrote)
        self.values: dict[tuple[int, int], str] = {}  # digests of PyTorch's values -> the operator that made them
        self.host: dict[Any, _Flow] = {}  # what flows into each value read back to the host, by read

    def _flow(self, tensors: list[torch.Tensor]) -> _Flow:
        flow = _NOTHING
        for t in tensors:
            flow = flow | self.flows.get(storage_key(t), _NOTHING)
        return flow

    def op(self, name: str, op: Any, args: Any, kwargs: dict, result: Any, read: Any = None) -> None:
        """After an ATen operator (`name`: `aten::add.Tensor`): its results and in-place writes take what flows
        into what it read, and itself when it computes. `read`: which host read it is, for `.item()`."""
        kind = family(name)
        reads = read_by(op, args, kwargs)
        if kind == "layout" and any(t.is_neg() or t.is_conj() for t in reads):
            kind = None  # a negated or conjugated view, materialized, is arithmetic
        flow = self._flow(reads)
        if base_name(name) == "_local_scalar_dense":
            self.host[read] = flow
        argument_keys = {storage_key(t) for t in launch_tensors(args, kwargs)}
        made = [t for t in launch_tensors([result], {}) if storage_key(t) not in argument_keys and _has_memory(t)]
        written = [t for t in written_by(op, args, kwargs) if _has_memory(t)]
        if not made and not written:
            return  # a view, or a value for the host
        if kind is None:
            flow = flow | _Flow(frozenset((len(self.computed),)))
            self.computed.append((name, sum(t.numel() for t in [*made, *written])))
        for t in made:
            self.flows[storage_key(t)] = flow
        for t in written:
            self.flows[storage_key(t)] = self.flows.get(storage_key(t), _NOTHING) | flow
        if (kind is None or kind in COPY_SOURCES) and reads and not flow.kernel:
            for t in [*made, *written]:
                self._remember(t, name)

    def launch(self, args: Any, kwargs: dict, changed: set[int] | None, reads: set[Any] = frozenset()) -> None:
        """After a launch: `changed`, the storages whose bytes it changed (None when not measured: every
        argument's but the inputs'); `reads`, the host reads its scalar arguments are computed from. A storage the launch left holding, as one of its arguments, a value PyTorch
        made is a copy of it, not the kernel's work: what PyTorch then makes from it is remembered too."""
        tensors = [t for t in launch_tensors(args, kwargs) if _has_memory(t)]
        flow = self._flow(tensors)
        for read in reads:
            flow = flow | self.host.get(read, _NOTHING)
        keys = changed if changed is not None else {storage_key(t) for t in tensors} - self.inputs
        copies = {storage_key(t) for t in tensors if storage_key(t) in keys and self._made_by(t) is not None}
        for key in keys:
            self.flows[key] = self.flows.get(key, _NOTHING) | flow | _Flow(kernel=key not in copies)

    def _made_by(self, t: torch.Tensor) -> str | None:
        """The operator that made a value equal to `t`'s, if PyTorch made one (one constant is no one's)."""
        if not self.values or not t.numel() or trivial(t):
            return None
        return self.values.get(tensor_digest(canonical(t)))

    def _remember(self, t: torch.Tensor, name: str) -> None:
        if not t.numel() or trivial(t):
            return
        digest = tensor_digest(canonical(t))
        if digest not in self.known:
            self.values.setdefault(digest, name)

    def findings(self, result: Any) -> list[Finding]:
        """Each output that breaks the rule (work_policy.py), at most one finding per output, by index."""
        found: list[Finding] = []
        for i, out in enumerate(as_tensors(result)):
            if not isinstance(out, torch.Tensor) or not out.numel():
                continue
            computed: dict[str, int] = {}
            for step in self.flows.get(storage_key(out), _NOTHING).steps if _has_memory(out) else ():
                name, elements = self.computed[step]
                computed[name] = computed.get(name, 0) + elements
            finding = fallback(i, out.numel(), computed)
            made_by = self._made_by(out) if finding is None else None
            if made_by is not None:
                finding = Finding(i, "exact_copy", made_by)
            if finding is not None:
                found.append(finding)
        return found


def _has_memory(t: torch.Tensor) -> bool:
    return bool(t.untyped_storage().nbytes())


__all__ = ["WorkFlow"]
