"""The work check as a stated rule: which ATen operators a candidate's forward may run around its own kernels.

A kernel benchmark measures the candidate's Triton kernels, so the work of `forward` must be theirs. PyTorch may
prepare and arrange data for them (the families below, each with its reason), and compute glue too small to be the
task's work. Any other ATen operator whose results reach an output is library fallback: PyTorch did the work.
The replay (replay/run.py) follows the data of the recorded call (replay/flow.py) and judges each output here:

- `library_fallback`: an operator outside the table wrote data that reaches the output, and such operators'
  results reaching it hold more than 1/GLUE_SHARE of its elements; the largest is named;
- `exact_copy`: the output is, bit for bit, a value a compute or layout operator made inside forward from data no
  kernel wrote (laundering: PyTorch computes, a kernel copies), unless that value is an input's or a parameter's
  own (an identity's work) or one constant.

Operators are named by their ATen name without overload (`aten::add.Tensor` is `add`).
"""

from __future__ import annotations

from dataclasses import dataclass

GLUE_SHARE = 64  # glue: compute operators' results reaching an output hold at most 1/64 of its elements

FAMILIES: dict[str, str] = {
    "allocation": "makes memory or a constant: no value of the inputs is in it",
    "random": "fills memory with random draws: no value of the inputs is in it",
    "view": "another shape, stride or dtype over the same memory: moves nothing",
    "layout": "moves or converts values into a new layout, dtype or buffer: computes nothing",
    "metadata": "reads a size or a scalar to the host (`.item()`); a value read still carries its data's flow",
}

_TABLE: dict[str, tuple[str, ...]] = {
    "allocation": ("empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided",
                   "zeros", "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like",
                   "new_full", "scalar_tensor", "arange", "fill_", "zero_", "resize_", "resize_as_",
                   "lift_fresh_copy"),
    "random": ("rand", "randn", "rand_like", "randn_like", "randint", "randint_like", "randperm", "normal_",
               "uniform_", "random_", "exponential_", "bernoulli_"),
    "view": ("view", "_unsafe_view", "_reshape_alias", "reshape", "as_strided", "alias", "detach", "lift_fresh",
             "t", "transpose", "permute", "expand", "expand_as", "squeeze", "unsqueeze", "select", "slice", "narrow",
             "split", "split_with_sizes", "unsafe_split", "unbind", "chunk", "diagonal", "unfold", "view_as",
             "view_as_real", "view_as_complex", "movedim", "swapaxes", "flatten", "unflatten"),
    "layout": ("clone", "contiguous", "copy_", "_to_copy", "to", "cat", "stack", "constant_pad_nd", "repeat",
               "view_copy", "_unsafe_view_copy", "permute_copy", "transpose_copy", "t_copy", "expand_copy",
               "slice_copy", "select_copy", "unsqueeze_copy", "squeeze_copy", "as_strided_copy"),
    "metadata": ("_local_scalar_dense", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "is_same_size"),
}

ALLOWED: dict[str, str] = {name: family for family, names in _TABLE.items() for name in names}
COPY_SOURCES = frozenset(("layout",))  # the allowed family whose values the exact-copy check remembers


def base_name(op: str) -> str:
    """`aten::add.Tensor` -> `add`: the table names operators without namespace or overload."""
    return op.split("::")[-1].split(".")[0]


def family(op: str) -> str | None:
    """The allowed family of an ATen (or prims) operator, None for a compute operator."""
    if op.split("::")[0] not in ("aten", "prims"):
        return None
    return ALLOWED.get(base_name(op))


@dataclass(frozen=True)
class Finding:
    """Why one output breaks the rule: `rule` (library_fallback | exact_copy), the operator named, and for a
    fallback the elements compute operators wrote that reach the output and the bound they went over."""

    output: int
    rule: str
    op: str
    elements: int = 0
    bound: int = 0

    def as_json(self) -> dict:
        return {"output": self.output, "rule": self.rule, "op": self.op[:80], "elements": self.elements,
                "bound": self.bound}


def glue_bound(output_elements: int) -> int:
    """The most elements compute operators may write into what reaches an output of this size."""
    return output_elements // GLUE_SHARE


def fallback(output: int, output_elements: int, computed: dict[str, int]) -> Finding | None:
    """`computed`: per compute operator reaching the output, the elements it wrote. A finding naming the largest
    when together they are over the glue bound."""
    total, bound = sum(computed.values()), glue_bound(output_elements)
    if not computed or total <= bound:
        return None
    op = max(computed, key=lambda name: computed[name])
    return Finding(output, "library_fallback", op, total, bound)


__all__ = ["ALLOWED", "COPY_SOURCES", "FAMILIES", "GLUE_SHARE", "Finding", "base_name", "fallback", "family",
           "glue_bound"]
