"""Small-step edits: exact search/replace pairs applied in order to the parent kernel."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

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


def apply_edits(source: str, edits: Iterable[Edit | Mapping[str, str]]) -> str:
    """Apply each edit to the result of the previous one; `old` must occur exactly once at that point."""
    parsed = parse_edits(edits)
    if not parsed:
        raise EditError("edits is empty: send at least one {old, new} pair, or a full kernel_source")
    for i, e in enumerate(parsed):
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
