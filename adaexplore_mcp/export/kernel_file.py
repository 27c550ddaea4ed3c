"""The best kernel as one standalone KernelBench-format file.

KernelBench's convention: a candidate file defines `ModelNew` (and its Triton kernels) and can be
dropped into KernelBench's runner next to the problem file. The file written here is also
self-contained: it carries the task's reference verbatim (`Model`, the shape constants,
`get_inputs`, `get_init_inputs`) so it imports and runs on its own, e.g.

    m = ModelNew(*get_init_inputs()).cuda(); out = m(*[x.cuda() for x in get_inputs()])

Layout: header comment, `from __future__` imports (they must come first), the reference, then
the candidate. Where the candidate redefines a name the reference owns (`Model`, `get_inputs`,
`get_init_inputs`, a shape constant), the candidate's copy is dropped so the task's definition
holds, and a comment says so.
"""

from __future__ import annotations

import ast
import datetime as _dt
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from adaexplore_mcp.tasks.format import integer_constants, top_level_names
from adaexplore_mcp import pyparse, speedups
from adaexplore_mcp.models import Speedups

REFERENCE_OWNS = ("Model", "get_inputs", "get_init_inputs")


class KernelFileError(ValueError):
    """The sources cannot make a usable KernelBench file; the message says what is missing."""


class KernelMeta(BaseModel):
    """What the header says about the kernel. Every field is optional."""

    task: str = ""
    speedup: float | None = None
    speedup_tf32: float | None = None
    speedups: Speedups | None = None  # every yardstick; when given, the header shows it instead of the two above
    gpu: str | None = None
    date: str | None = None  # ISO date; today (UTC) when None
    search_id: str | None = None
    node_id: str | None = None
    strategy: str | None = None
    verdict: str | None = None
    notes: list[str] = []


def _meta(meta: KernelMeta | Mapping[str, Any] | None) -> KernelMeta:
    if meta is None:
        return KernelMeta()
    if isinstance(meta, KernelMeta):
        return meta
    return KernelMeta.model_validate({k: v for k, v in meta.items() if v is not None})


def _parse(source: str, what: str) -> ast.Module:
    try:
        return pyparse.parse(source)
    except SyntaxError as exc:
        raise KernelFileError(f"the {what} does not parse: line {exc.lineno}: {exc.msg}") from exc


def _span(node: ast.stmt) -> tuple[int, int]:
    """0-based [start, end) line span of a top-level statement, decorators included."""
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return start - 1, node.end_lineno or node.lineno


def _defined_names(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
        return {node.target.id}
    return set()


def _split(source: str, tree: ast.Module, drop_names: set[str]) -> tuple[list[str], str, list[str]]:
    """(future import lines, the source without them and without dropped definitions, dropped names)."""
    lines = source.splitlines()
    remove: list[tuple[int, int]] = []
    futures: list[str] = []
    dropped: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            start, end = _span(node)
            futures.append(" ".join(line.strip() for line in lines[start:end]))
            remove.append((start, end))
            continue
        names = _defined_names(node)
        if names and names <= drop_names:
            remove.append(_span(node))
            dropped.extend(sorted(names))
    keep = [line for i, line in enumerate(lines) if not any(s <= i < e for s, e in remove)]
    text = re.sub(r"\n(\s*\n){3,}", "\n\n\n", "\n".join(keep))  # no gaps where code was cut
    return futures, text.strip("\n"), dropped


def _header(meta: KernelMeta) -> str:
    date = meta.date or _dt.datetime.now(_dt.timezone.utc).date().isoformat()
    timed = meta.speedups or (Speedups(eager=meta.speedup, tf32=meta.speedup_tf32) if meta.speedup is not None else None)
    if timed is not None:
        speed = speedups.text(timed) + " (eager: the PyTorch reference in strict fp32)"
    else:
        speed = "not timed (judged without a GPU, under Triton's CPU interpreter)"
    lines = [
        f"adaexplore-mcp: best kernel for task {meta.task or '(unnamed)'}",
        f"speedup: {speed}",
        f"GPU: {meta.gpu or 'none (CPU interpreter)'}",
        f"date: {date}",
    ]
    search = ", ".join(
        part
        for part in (
            f"search {meta.search_id}" if meta.search_id else "",
            f"node {meta.node_id}" if meta.node_id else "",
            f"strategy {meta.strategy}" if meta.strategy else "",
            f"verdict {meta.verdict}" if meta.verdict else "",
        )
        if part
    )
    if search:
        lines.append(search)
    lines += list(meta.notes)
    lines += [
        "",
        "KernelBench format: ModelNew (the optimized module and its Triton kernels) next to the task's",
        "reference Model, shape constants, get_inputs() and get_init_inputs(). Usage:",
        "    model = ModelNew(*get_init_inputs()).cuda()",
        "    out = model(*[x.cuda() for x in get_inputs()])",
    ]
    # every physical line commented: a task name or note with a line break in it (stored before names were
    # checked, say) must not write code into the exported file
    return "\n".join(f"# {part}".rstrip() for line in lines for part in (str(line).splitlines() or [""]))


def standalone_kernel_file(
    task_reference_source: str, kernel_source: str, meta: KernelMeta | Mapping[str, Any] | None = None
) -> str:
    """One importable file: header, the task's reference (Model, constants, get_inputs...), then ModelNew.

    Raises KernelFileError when the reference lacks Model/get_inputs/get_init_inputs, the kernel
    lacks ModelNew, or either does not parse.
    """
    ref_tree = _parse(task_reference_source, "task reference")
    missing = [n for n in REFERENCE_OWNS if n not in top_level_names(ref_tree)]
    if missing:
        raise KernelFileError(f"the task reference does not define {', '.join(missing)}")
    cand_tree = _parse(kernel_source, "kernel source")
    if "ModelNew" not in top_level_names(cand_tree):
        raise KernelFileError("the kernel source does not define class ModelNew")

    reference_names = set(REFERENCE_OWNS) | set(integer_constants(task_reference_source))
    ref_futures, reference, _ = _split(task_reference_source, ref_tree, set())
    cand_futures, candidate, dropped = _split(kernel_source, cand_tree, reference_names)
    futures = list(dict.fromkeys(ref_futures + cand_futures))

    parts = [_header(_meta(meta))]
    if futures:
        parts.append("\n".join(futures))
    parts.append("# " + "-" * 30 + " the task's reference (unchanged) " + "-" * 30 + "\n\n" + reference)
    cand_title = "# " + "-" * 30 + " the optimized kernel: ModelNew " + "-" * 31
    if dropped:
        cand_title += f"\n# (the kernel's own {', '.join(dropped)} removed: the reference's definitions above hold)"
    parts.append(cand_title + "\n\n" + candidate)
    text = "\n\n\n".join(parts) + "\n"

    result = _parse(text, "assembled file")  # a bug here is ours, not the caller's
    names = top_level_names(result)
    assert {"ModelNew", *REFERENCE_OWNS} <= names, sorted(names)
    return text
