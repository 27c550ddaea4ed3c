"""expand_nodes: several steps' kernels evaluated in one call, concurrently, each item's failure its own.

Why threads: an evaluation waits on the judge (a worker process, or the GPU), so several items of one call
keep several judge workers busy; the bookkeeping of each item is the same short transactions as a single
expand_node (claim, evaluate outside any transaction, attach), so items never see each other's half-done
work. An item that fails (a bad edit, a step already used or expired, a judge error) becomes that item's
error; the call itself fails only for what concerns every item (an unknown search, a malformed list).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from adaexplore_mcp.errors import UserError, error_message, quote
from adaexplore_mcp.search.evaluator import Progress
from adaexplore_mcp.search.types import MAX_STEPS_AT_ONCE, ExpandBatch, ExpandItem, ExpandItemResult

if TYPE_CHECKING:
    from adaexplore_mcp.search.service import SearchService


def expand_batch(service: SearchService, search_id: str, items: Sequence[ExpandItem | Mapping[str, Any]],
                 next: int = 0, progress: Progress | None = None) -> ExpandBatch:
    """One ExpandItemResult per item, in the items' order; then, with `next`, that many briefs."""
    if not isinstance(items, Sequence) or isinstance(items, (str, bytes)) or not 1 <= len(items) <= MAX_STEPS_AT_ONCE:
        raise UserError(f"items must be a list of 1 to {MAX_STEPS_AT_ONCE} {{step_id, kernel_source | edits, note}}")
    if isinstance(next, bool) or not isinstance(next, int) or not 0 <= next <= MAX_STEPS_AT_ONCE:
        raise UserError(f"next must be an integer from 0 to {MAX_STEPS_AT_ONCE}, got {quote(next)}")
    try:
        parsed = [item if isinstance(item, ExpandItem) else ExpandItem.model_validate(item) for item in items]
    except ValidationError as exc:
        raise UserError(f"bad item in items: {exc.errors()[0]['msg']}; each item is "
                        "{step_id, kernel_source | edits, note}") from None
    service.summary(search_id)  # an unknown search fails the call, not every item

    def one(item: ExpandItem) -> ExpandItemResult:
        try:
            result = service.expand_node(search_id, item.step_id, item.kernel_source, item.edits, item.note)
            return ExpandItemResult(step_id=item.step_id, ok=True, result=result)
        except Exception as exc:  # one item's failure is that item's, whatever it is
            return ExpandItemResult(step_id=item.step_id, ok=False, error=error_message(exc))

    with ThreadPoolExecutor(max_workers=len(parsed), thread_name_prefix="expand") as pool:
        futures = [pool.submit(one, item) for item in parsed]
        for finished, _ in enumerate(as_completed(futures), 1):  # progress from the caller's thread
            if progress is not None:
                progress(finished / len(futures), f"{finished} of {len(futures)} kernels evaluated")
        results = [f.result() for f in futures]
    summary = service.summary(search_id)
    batch = ExpandBatch(search_id=search_id, results=results, steps_used=summary.steps_used,
                        steps_left=summary.steps_left, done=summary.done)
    if next:
        try:
            batch.next_step = service.next_step(search_id, next)
        except UserError as exc:
            batch.warnings.append(f"no next step in this result: {exc}")
    return batch


__all__ = ["expand_batch"]
