"""Pieces of the brief: compact evaluations, trimmed kernels, task summary, the instructions text.

Size budget: each kernel in the pool or working memory is cut to KERNEL_CHARS, all of them together to
TOTAL_KERNEL_CHARS (the parent kernel of a small step is always whole: edits must match it exactly).
A cut kernel keeps its head and points to its `kernel_uri` for the full source.
"""

from __future__ import annotations

import json
import sqlite3

from adaexplore_mcp.models import TaskInfo
from adaexplore_mcp.search.types import EvaluationSummary, KernelRef, TaskBrief

KERNEL_CHARS = 6000
TOTAL_KERNEL_CHARS = 20000
ERROR_CHARS = 400
TRUNCATION_MARK = "\n# ... [truncated: the full source is at kernel_uri]\n"

MODELNEW_CONTRACT = (
    "The kernel is Python source defining `class ModelNew(nn.Module)`, a drop-in for the reference `Model`: "
    "same __init__ and forward signatures, same parameters and buffers by name (the judge copies the "
    "reference's weights into it), forward returning the same outputs, with the work done by Triton "
    "kernels (@triton.jit) that forward launches. Keep float32 accuracy (no fp16/bf16/TF32 shortcuts)."
)
SMALL_INSTRUCTIONS = (
    "SMALL step: make a local improvement to parent_kernel (tune block sizes, num_warps, fuse or reorder a "
    "loop, fix the error if the parent failed). working_memory is the refinement chain that led here, oldest "
    "first; the parent is its last entry. Reply with expand_node(search_id, step_id, edits=[{old, new}, ...], "
    "note='<one line: what you changed>'): each `old` must be an exact, unique excerpt of parent_kernel "
    "(edits apply in order). Send a full kernel_source instead only if the change is not local. "
)
LARGE_INSTRUCTIONS = (
    "LARGE step: write a complete new kernel from scratch, with a different approach, meant to beat every "
    "kernel in the pool (the best kernels of other branches; empty at the root). Reply with "
    "expand_node(search_id, step_id, kernel_source='<full source>', note='<one line: the approach>'). "
)
RULES_INSTRUCTIONS = "Respect every rule in `rules`: each one was distilled from real failures. "
TIMING_ON = "Kernels are timed on the GPU; reward grows with speedup over the PyTorch reference (capped at 10x)."
TIMING_OFF = (
    "Timing is unavailable (no GPU: kernels run under Triton's CPU interpreter). Correctness is checked; "
    "every correct kernel is scored as speedup 1, so aim for a correct kernel that should be fast on a GPU."
)


def evaluation_summary(evaluation_json: str | None, verdict: str | None, speedup: float | None,
                       reward: float | None) -> EvaluationSummary:
    """verdict, speedup, reward and the one line that says what went wrong."""
    return EvaluationSummary(verdict=verdict or "none", speedup=speedup, reward=round(reward or 0.0, 4),
                             error=error_excerpt(json.loads(evaluation_json) if evaluation_json else {}))


def error_excerpt(ev: dict) -> str | None:
    if ev.get("error"):
        err = ev["error"]
        text = f"{err.get('exception', '')}: {err.get('message', '')}"
        if err.get("source_line"):
            text += f" | at line {err.get('source_lineno')}: {err['source_line'].strip()}"
    elif ev.get("mismatch"):
        m = ev["mismatch"]
        text = (f"output {m.get('output_index')} {m.get('reason')} mismatch (trial {m.get('trial')}, shape "
                f"{m.get('shape')}): max_abs_error={m.get('max_abs_error')} max_rel_error={m.get('max_rel_error')}")
    elif ev.get("rejected"):
        text = f"rejected ({ev['rejected'].get('check')}): {ev['rejected'].get('message')}"
    else:
        return None
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 3] + "..."


def kernel_uri(search_id: str, node_id: int) -> str:
    return f"adaexplore://searches/{search_id}/nodes/{node_id}/kernel"


def reference_uri(task_id: str) -> str:
    return f"adaexplore://tasks/{task_id}/reference"


def kernel_refs(search_id: str, ids: list[int], rows: dict[int, sqlite3.Row], omit: set[int] = frozenset(),
                per_kernel: int = KERNEL_CHARS, total: int = TOTAL_KERNEL_CHARS) -> list[KernelRef]:
    """KernelRefs in the order of `ids`, kernels cut to the size budget (`omit`: ids shown elsewhere)."""
    out, left = [], total
    for i in ids:
        r = rows[i]
        source = r["kernel_source"] or ""
        text, truncated = None, False
        if i not in omit and left > 200:
            cap = min(per_kernel, left)
            if len(source) > cap:
                text, truncated = source[: cap - len(TRUNCATION_MARK)] + TRUNCATION_MARK, True
            else:
                text = source
            left -= len(text)
        elif i not in omit:
            truncated = True
        out.append(KernelRef(
            node_id=i, kind=r["kind"], note=r["note"] or "", kernel=text, kernel_truncated=truncated,
            kernel_uri=kernel_uri(search_id, i),
            evaluation=evaluation_summary(r["evaluation"], r["verdict"], r["speedup"], r["reward"]),
        ))
    return out


def task_brief(task_id: str, info: TaskInfo | None) -> TaskBrief:
    if info is None:
        return TaskBrief(task_id=task_id, name=task_id, reference_uri=reference_uri(task_id))
    return TaskBrief(task_id=task_id, name=info.name, description=info.description, inputs=info.inputs,
                     outputs=info.outputs, degenerate=info.degenerate, reference_uri=reference_uri(task_id))


def instructions(kind: str, timing_available: bool, reference: str) -> str:
    body = SMALL_INSTRUCTIONS if kind == "small" else LARGE_INSTRUCTIONS
    return (body + RULES_INSTRUCTIONS + MODELNEW_CONTRACT + f" The PyTorch reference is the resource {reference}. "
            + (TIMING_ON if timing_available else TIMING_OFF))
