"""The brief of one search step, assembled from the records the service read: what the model reads every
step, so every part of it earns its characters.

- The parent kernel of a small step is whole (edits must match it exactly); the other nodes of the working
  memory are unified diffs against the node after them in the chain: a tuning step is a few lines, not kilobytes.
- Pool kernels (large steps) are cut to POOL_KERNEL_CHARS each and POOL_TOTAL_CHARS in all; a cut kernel keeps
  its head and points to its `kernel_uri` for the full source.
- At most max_rules rules (MAX_RULES by default), chosen for this step (the chain's failures, this task's own
  failure clusters, the parent's tl APIs, this machine's most frequent failures); the brief counts
  the others and names where they are, instead of repeating the same 16 rules every step.
- The task as it is run: the shapes the judge evaluates (small ones under the CPU interpreter), the device, and
  the reference source itself in a root step (the search's first brief), since many clients never let the
  model read a resource.
- Without timing every correct kernel scores alike, and the brief says so rather than implying a ranking.
"""

from __future__ import annotations

import difflib
import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from adaexplore_mcp import speedups
from adaexplore_mcp.memory.relevance import step_ranking
from adaexplore_mcp.models import Evaluation, RuleRef, TaskInfo
from adaexplore_mcp.search.tree import MAX_RULES
from adaexplore_mcp.search.types import BestSummary, EvaluationSummary, KernelRef, MemoryEntry, StepBrief, TaskBrief

if TYPE_CHECKING:
    from adaexplore_mcp.search.records import NodeRecord, SearchRecord, StepRecord

KERNEL_CHARS = 6000  # kernel_refs' default cap per kernel (and get_search's, views.budgeted_source)
TOTAL_KERNEL_CHARS = 20000
POOL_KERNEL_CHARS = 4000
POOL_TOTAL_CHARS = 10000
DIFF_CHARS = 1500
DIFF_CONTEXT = 1
RULES_CHARS = 600
ERROR_CHARS = 400
TRUNCATION_MARK = "\n# ... [truncated: the full source is at kernel_uri]\n"

MODELNEW_CONTRACT = (
    "The kernel is Python source defining `class ModelNew(nn.Module)`, a drop-in for the reference `Model`: "
    "same __init__ and forward signatures and outputs. The judge builds both under the same seed (create "
    "parameters and buffers in the same order and shapes as Model; if that mismatches, it retries with Model's "
    "weights copied in by name) and leaves them in the mode their constructors set. It is checked again at a "
    "second shape set (the task's size constants moved to values that are no multiple of 16), so write no shape "
    "into a kernel: handle any size, masking every dimension. The work must be done by "
    "Triton kernels (@triton.jit, defined at module level) that forward launches; around them PyTorch may only "
    "allocate, view, reshape, copy, cast or pad (other PyTorch compute reaching an output, beyond glue of 1/64 of "
    "it, is rejected as library fallback). Keep the task's precision (no fp16/bf16/TF32 shortcuts "
    "on a float32 task; tl.dot input_precision='ieee' or 'tf32x3' keeps float32, judged by its measured error): "
    "a kernel below the task's precision is ranked and rewarded only by its speedup against "
    "the reference run at reduced precision (TF32), never against strict fp32."
)
SMALL_INSTRUCTIONS = (
    "SMALL step: improve parent_kernel locally (tiles, num_warps, loop order, fusion), or fix it if it failed "
    "(parent_failure has the whole error or mismatch). "
    "working_memory: the chain to here, oldest first, older nodes as diffs. Reply expand_node(search_id, "
    "step_id, edits=[{old, new}, ...], note='<what changed>'), each old an exact, unique excerpt of "
    "parent_kernel (applied in order); kernel_source only for a change that is not local. ModelNew stays a "
    "drop-in for Model (signatures, outputs, precision, the work in @triton.jit kernels, any shape: it is "
    "checked again with the task's sizes moved). "
)
SMALL_INSTRUCTIONS_CPU = (
    "SMALL step: fix parent_kernel if it failed (parent_failure has the whole error or mismatch), or make one "
    "local change that keeps it correct and should be faster on a GPU (fusion, fewer passes over memory). "
    "Steps are judged on correctness only here (no GPU timing): do not spend steps tuning tiles or num_warps, "
    "which the CPU cannot measure. " + SMALL_INSTRUCTIONS.split(". ", 2)[2]
)
LARGE_INSTRUCTIONS = (
    "LARGE step: write a complete new kernel from scratch, with a different approach, meant to beat every "
    "kernel in the pool (the best kernels of other branches; empty at the root). Reply with "
    "expand_node(search_id, step_id, kernel_source='<full source>', note='<one line: the approach>'). "
)
RULES_INSTRUCTIONS = "Respect every rule in `rules` (the most relevant; rules_more others at rules_uri). "
TIMING_ON = "Kernels are timed on the GPU; reward grows with speedup over the PyTorch reference (capped at 10x)."
CPU_HONEST = "CPU interpreter: correctness only, no speedups; all passing kernels rank equal"
TIMING_OFF = ("Timing is unavailable (no GPU). " + CPU_HONEST + " (each scores as speedup 1): aim for a "
              "correct kernel that should be fast on a GPU.")
CPU_DEVICE = "CPU interpreter, no timing"


def evaluation_summary(evaluation_json: str | None, verdict: str | None, speedup: float | None,
                       reward: float | None) -> EvaluationSummary:
    """verdict, speedup (and against every yardstick), reward and the one line that says what went wrong."""
    ev = json.loads(evaluation_json) if evaluation_json else {}
    ev = ev if isinstance(ev, dict) else {}
    timed = speedups.of_fields(ev)
    return EvaluationSummary(verdict=verdict or "none", speedup=speedup, reward=round(reward or 0.0, 4),
                             speedups=speedups.text(timed) if timed is not None else None,
                             precision=precision_text(ev), error=error_excerpt(ev))


def precision_text(ev: Mapping[str, Any]) -> str | None:
    """A pass below the task's precision, and what it is ranked against; None at the task's precision."""
    precision = ev.get("precision") if isinstance(ev.get("precision"), Mapping) else {}
    if not precision.get("below_fp32") or ev.get("verdict") not in (None, "passed"):
        return None
    reasons = "; ".join(str(r) for r in precision.get("reasons") or [])[:200]
    ranked = " (ranked by its speedup vs the TF32 reference)" if ev.get("speedup") is not None else ""
    return f"below the task's precision: {reasons or 'reduced precision'}{ranked}"


def below_precision_note(evaluation: Evaluation) -> str:
    """The warning of an expand result whose pass computes below the task's precision."""
    reasons = "; ".join(evaluation.precision.reasons)[:300] or "reduced precision"
    return (f"below the task's precision ({reasons}): ranked and rewarded by its speedup against the reference "
            f"with TF32 allowed ({evaluation.speedup_tf32:.2f}x), not against strict fp32 ({evaluation.speedup:.2f}x). "
            "Keep the task's precision to be ranked against the strict reference.")


FAILURE_CHARS = 2500


def failure_detail(ev: Mapping[str, Any]) -> str | None:
    """Everything a repair needs from a failed evaluation, as text: the error with its offending line and the
    traceback's tail, or every field of a mismatch (worst index, expected/got, mismatched fraction), or the
    rejection's whole message. None for a pass."""
    if ev.get("verdict") == "passed":
        return None
    parts: list[str] = []
    if isinstance(ev.get("error"), Mapping):
        err = ev["error"]
        parts.append(f"{err.get('exception', '')}: {err.get('message', '')}")
        if err.get("source_line"):
            parts.append(f"at kernel line {err.get('source_lineno')}: {str(err['source_line']).strip()}")
        if err.get("excerpt"):
            parts.append(str(err["excerpt"]).strip())
    if isinstance(ev.get("mismatch"), Mapping):
        m = ev["mismatch"]
        fields = ", ".join(f"{k}={m[k]}" for k in ("output_index", "trial", "shape", "reason", "max_abs_error",
                                                    "max_rel_error", "rel_norm_error", "worst_index", "expected",
                                                    "got", "mismatched_fraction", "expected_spec", "got_spec")
                           if m.get(k) is not None)
        parts.append(f"mismatch: {fields}")
    if isinstance(ev.get("rejected"), Mapping):
        parts.append(f"rejected ({ev['rejected'].get('check')}): {ev['rejected'].get('message')}")
    for w in ev.get("warnings") or []:
        parts.append(f"warning: {w}")
    if not parts:
        return None
    text = "\n".join(parts)
    return text if len(text) <= FAILURE_CHARS else text[: FAILURE_CHARS - 3] + "..."


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


def instructions(kind: str, timing_available: bool, reference: str, inline_reference: bool = False) -> str:
    """The step's instructions. Why two lengths: a small step edits a kernel that already meets the contract,
    so it gets the contract in one sentence; the timing sentence is short here (the full one is timing_note)."""
    timing = TIMING_ON if timing_available else "No timing: correctness only (timing_note)."
    if kind == "small":
        return (SMALL_INSTRUCTIONS if timing_available else SMALL_INSTRUCTIONS_CPU) + RULES_INSTRUCTIONS + timing
    where = ("is reference_source in this brief" if inline_reference
             else f"is returned by get_task(task_id) (and is the resource {reference})")
    return LARGE_INSTRUCTIONS + RULES_INSTRUCTIONS + MODELNEW_CONTRACT + f" The PyTorch reference {where}. " + timing


# -- the step's brief ------------------------------------------------------------------------------

def step_brief(search: SearchRecord, step: StepRecord, memory_ids: Sequence[int], pool_ids: Sequence[int],
               nodes: Mapping[int, NodeRecord], task: TaskInfo | None, rules: Sequence[RuleRef],
               timing_available: bool, gpu: str | None, best: BestSummary | None,
               reference_source: str | None = None, task_rule_ids: Sequence[str] = ()) -> StepBrief:
    """The brief of a pending step. `nodes` holds the parent and every node of memory_ids and pool_ids, with
    sources and evaluations; `rules` are every rule that applies to the task (the brief shows a few, at most
    the search's max_rules); `task_rule_ids` those of this task's own failure clusters, most frequent first.
    `reference_source` is shown when the step starts from the root (the model writes from the reference) and
    in a repair (a small step on a failed parent: a wrong output is fixed against the reference)."""
    sid, kind, parent = search.search_id, step.kind, step.parent_id
    p = nodes.get(parent) if parent != 0 else None
    chain = list(reversed(memory_ids)) if kind == "small" else [parent] if p is not None else []
    named, failures = failure_context(chain, nodes)
    shown, more = pick_rules([*named, *rules], [r.rule_id for r in named], failures,
                             (p.kernel_source or "") if p is not None else "", task_rule_ids,
                             search.search_params.max_rules)
    repair = kind == "small" and p is not None and p.verdict != "passed"
    inline = (parent == 0 or repair) and bool(reference_source)
    gpu = gpu or gpu_named(nodes.values())
    task_view = task_brief(search.task_id, task)
    out = StepBrief(
        search_id=sid, step_id=step.step_id, kind=kind, parent_node_id=parent,  # type: ignore[arg-type]
        strategy=search.strategy, rules=shown, rules_more=more, task=task_view,
        reference_source=reference_source if inline else None,
        evaluated_shapes=evaluated_shapes(task, timing_available), timing_available=timing_available,
        gpu=gpu, device=device_label(timing_available, gpu),
        timing_note=TIMING_ON if timing_available else TIMING_OFF,
        instructions=instructions(kind, timing_available, task_view.reference_uri, inline),
        budget=search.budget, steps_used=search.steps_used, steps_left=search.steps_left, best=best,
    )
    if p is not None:
        out.parent_kernel_uri = kernel_uri(sid, parent)
        out.parent_evaluation = evaluation_summary(p.evaluation, p.verdict, p.speedup, p.reward)
        if kind == "small":
            out.parent_kernel = p.kernel_source
        if repair:
            out.parent_failure = failure_detail(_evaluation(p))
    if kind == "small":
        out.working_memory = memory_entries(sid, memory_ids, nodes)
    else:
        out.pool = kernel_refs(sid, list(pool_ids), nodes, per_kernel=POOL_KERNEL_CHARS,  # type: ignore[arg-type]
                               total=POOL_TOTAL_CHARS)
    return out


def memory_entries(search_id: str, ids: Sequence[int], rows: Mapping[int, NodeRecord]) -> list[MemoryEntry]:
    """The working memory, oldest first: the last node (the parent, shown whole as parent_kernel) bare, every
    other node as a diff against the node after it, so the chain can be rebuilt from the parent backwards."""
    out = []
    for k, i in enumerate(ids):
        r = rows[i]
        entry = MemoryEntry(node_id=i, kind=r.kind, note=r.note or "", kernel_uri=kernel_uri(search_id, i),  # type: ignore[arg-type]
                            evaluation=evaluation_summary(r.evaluation, r.verdict, r.speedup, r.reward))
        if k + 1 < len(ids):
            base = ids[k + 1]
            entry.diff, entry.kernel_truncated = source_diff(rows[base].kernel_source or "", r.kernel_source or "",
                                                             base, i)
            entry.diff_base = base
        out.append(entry)
    return out


def source_diff(base: str, source: str, base_id: int, node_id: int) -> tuple[str, bool]:
    """A unified diff from node base_id's source to node_id's (1 line of context), cut to DIFF_CHARS; True
    when cut (the full source is at the node's kernel_uri)."""
    lines = difflib.unified_diff(base.splitlines(), source.splitlines(), f"node {base_id}", f"node {node_id}",
                                 n=DIFF_CONTEXT, lineterm="")
    text = "\n".join(lines)
    if not text:
        return f"(identical to node {base_id})", False
    if len(text) <= DIFF_CHARS:
        return text, False
    mark = "\n... [diff truncated: the full source is at kernel_uri]"
    return text[: DIFF_CHARS - len(mark)] + mark, True


def failure_context(chain: Sequence[int], rows: Mapping[int, NodeRecord]) -> tuple[list[RuleRef], list[str]]:
    """From the failed nodes of `chain` (newest first): the rules their evaluations fell under, and their
    error lines: what the next kernel must not repeat."""
    named: dict[str, RuleRef] = {}
    texts = []
    for i in chain:
        r = rows.get(i)
        if r is None or r.verdict in (None, "passed"):
            continue
        ev = _evaluation(r)
        for rule in ev.get("rules") or []:
            if isinstance(rule, dict) and rule.get("rule_id") and rule["rule_id"] not in named:
                named[rule["rule_id"]] = RuleRef(rule_id=rule["rule_id"], text=str(rule.get("text", "")))
        text = error_excerpt(ev)
        if text:
            texts.append(text)
    return list(named.values()), texts


def pick_rules(rules: Sequence[RuleRef], named: Sequence[str], failures: Sequence[str],
               kernel_source: str, task_rule_ids: Sequence[str] = (),
               max_rules: int = MAX_RULES) -> tuple[list[RuleRef], int]:
    """At most `max_rules` rules (and RULES_CHARS) most relevant to the step, and how many others apply
    (max_rules 0: no rule is shown, the Adapt stage's ablation)."""
    unique = list({r.rule_id: r for r in reversed(rules)}.values())[::-1]  # first occurrence wins
    if max_rules <= 0:
        return [], 0
    order = step_ranking([(r.rule_id, r.text) for r in unique], named, failures, kernel_source, task_rule_ids)
    shown: list[RuleRef] = []
    used = 0
    for i in order:
        cost = len(unique[i].text) + 3
        if len(shown) >= max_rules:
            break
        if shown and used + cost > RULES_CHARS:
            continue
        shown.append(unique[i])
        used += cost
    return shown, len(unique) - len(shown)


def evaluated_shapes(info: TaskInfo | None, timing_available: bool) -> str:
    """Which shapes the judge runs: on the GPU the task's own; under the CPU interpreter its small_shapes."""
    if timing_available:
        return "the task's full shapes (task.inputs), on the GPU"
    if info is not None and info.small_shapes:
        consts = ", ".join(f"{k}={v}" for k, v in info.small_shapes.items())
        return f"CPU interpreter at small shapes: {consts} (task.inputs/outputs are GPU sizes, not run here)"
    return "the task's full shapes (task.inputs), under the CPU interpreter"


def device_label(timing_available: bool, gpu: str | None) -> str:
    if not timing_available:
        return CPU_DEVICE
    return gpu or "a GPU (name not reported yet)"


def gpu_named(rows: Any) -> str | None:
    """The GPU named by a shown node's timed evaluation, when the service was not told one."""
    for r in rows:
        timing = _evaluation(r).get("timing") if r.evaluation else None
        if isinstance(timing, dict) and timing.get("gpu"):
            return str(timing["gpu"])
    return None


def _evaluation(row: NodeRecord) -> dict:
    try:
        ev = json.loads(row.evaluation) if row.evaluation else {}
    except ValueError:
        return {}
    return ev if isinstance(ev, dict) else {}
