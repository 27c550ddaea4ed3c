"""Small-step edits: exact search/replace pairs applied in order to the parent kernel."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from adaexplore_mcp.errors import UserError
from adaexplore_mcp.search.types import Edit


class EditError(UserError):
    """An edit could not be applied; nothing was changed and the step stays pending."""


def _short(text: str, limit: int = 120) -> str:
    one = text.replace("\n", "\\n")
    return one if len(one) <= limit else one[: limit - 3] + "..."


def parse_edits(edits: Iterable[Edit | Mapping[str, str]]) -> list[Edit]:
    out = []
    for i, e in enumerate(edits):
        if isinstance(e, Edit):
            out.append(e)
        elif isinstance(e, Mapping) and isinstance(e.get("old"), str) and isinstance(e.get("new"), str):
            out.append(Edit(old=e["old"], new=e["new"]))
        else:
            raise EditError(f"edit {i} must be an object {{\"old\": str, \"new\": str}}, got {_short(repr(e))}")
    return out


MAX_EDITS = 200  # a small step is a few edits; each one scans the whole kernel (100,000
# edits took 28 s of the server's CPU in one call)


def apply_edits(source: str, edits: Iterable[Edit | Mapping[str, str]], max_bytes: int | None = None) -> str:
    """Apply each edit to the result of the previous one; `old` must occur exactly once at that point. With
    `max_bytes`, a result that grows past it stops at the edit that made it so."""
    parsed = parse_edits(edits)
    if not parsed:
        raise EditError("edits is empty: send at least one {old, new} pair, or a full kernel_source")
    if len(parsed) > MAX_EDITS:
        raise EditError(f"{len(parsed)} edits; at most {MAX_EDITS} in one step (send a full kernel_source instead)")
    for i, e in enumerate(parsed):
        if max_bytes is not None and len(source) > max_bytes:
            raise EditError(f"after edit {i - 1} the kernel is {len(source)} characters; the limit is {max_bytes} bytes")
        if not e.old:
            raise EditError(f"edit {i}: `old` is empty; it must be an exact, unique excerpt of the parent kernel")
        count = source.count(e.old)
        if count == 0:
            raise EditError(
                f"edit {i}: `old` was not found in the parent kernel{' (after the earlier edits)' if i else ''}: "
                f"'{_short(e.old)}'. Copy it exactly from parent_kernel (whitespace included)."
            )
        if count > 1:
            raise EditError(
                f"edit {i}: `old` occurs {count} times in the parent kernel: '{_short(e.old)}'. "
                "Include more surrounding lines so it is unique."
            )
        source = source.replace(e.old, e.new, 1)
    return source


def candidate_source(kind: str, parent_source: Callable[[], str], kernel_source: str | None,
                     edits: Iterable[Edit | Mapping[str, str]] | None, max_bytes: int) -> str:
    """The kernel a step's answer stands for: the parent with `edits` applied (small steps; the parent's
    source is read only then), or `kernel_source`; a UserError that says what to send otherwise."""
    if kernel_source is not None and edits:
        raise UserError("send either edits or kernel_source, not both")
    if edits:
        if kind == "large":
            raise UserError("this is a large step: send a complete kernel_source (edits are for small steps)")
        source = apply_edits(parent_source(), edits, max_bytes)
    elif kernel_source is not None:
        source = kernel_source
    else:
        need = "kernel_source" if kind == "large" else "edits (or a full kernel_source)"
        raise UserError(f"expand_node needs {need} for this {kind} step")
    if not isinstance(source, str) or not source.strip():
        raise UserError("the kernel is empty; send Python source defining class ModelNew")
    size = len(source.encode())
    if size > max_bytes:
        raise UserError(f"the kernel is {size} bytes; the limit is {max_bytes} bytes")
    return source
