"""What a caller sees of a search, made from the repository's records: briefs, summaries, the tree view.

Pure functions (no I/O): the service reads the records in one snapshot and hands them here. "Best" follows
the one ranking rule of `adaexplore_mcp.ranking`, as the tree and the exports do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from adaexplore_mcp import speedups
from adaexplore_mcp.models import RuleRef, Speedups, TaskInfo
from adaexplore_mcp.ranking import running_best
from adaexplore_mcp.search import brief as B
from adaexplore_mcp.search.memory_pool import working_memory
from adaexplore_mcp.search.records import NodeRecord, SearchRecord, StepRecord
from adaexplore_mcp.search.tree import Tree
from adaexplore_mcp.search.types import BestSummary, NodeView, SearchParams, SearchSummary, SearchTree, StepBrief

TREE_SOURCE_CHARS = 60_000  # all kernel sources in one get_search result (~15k tokens)


@dataclass(frozen=True)
class BriefNodes:
    """The nodes a step's brief shows: its working memory (small steps) or pool (large steps), and its parent."""

    memory: list[int]
    pool: list[int]

    def wanted(self, parent: int) -> list[int]:
        return sorted(set(self.memory) | set(self.pool) | ({parent} if parent != 0 else set()))


def brief_nodes(step: StepRecord, tree: Tree, params: SearchParams) -> BriefNodes:
    memory = working_memory(tree, step.parent_id, params.memory_size) if step.kind == "small" else []
    return BriefNodes(memory=memory, pool=step.pool_ids if step.kind == "large" else [])


def step_brief(search: SearchRecord, step: StepRecord, tree: Tree, shown: BriefNodes, nodes: dict[int, NodeRecord],
               task: TaskInfo | None, rules: Sequence[RuleRef], timing_available: bool,
               gpu: str | None) -> StepBrief:
    """The brief of a pending step; `nodes` holds every node of `shown.wanted`, with sources and evaluations."""
    sid, kind, parent = search.search_id, step.kind, step.parent_id
    memory_ids, pool_ids = shown.memory, shown.pool
    task_view = B.task_brief(search.task_id, task)
    out = StepBrief(
        search_id=sid, step_id=step.step_id, kind=kind, parent_node_id=parent,  # type: ignore[arg-type]
        strategy=search.strategy, rules=list(rules), task=task_view, timing_available=timing_available, gpu=gpu,
        timing_note=B.TIMING_ON if timing_available else B.TIMING_OFF,
        instructions=B.instructions(kind, timing_available, task_view.reference_uri),
        budget=search.budget, steps_used=search.steps_used, steps_left=search.steps_left,
        best=best_summary(sid, tree),
    )
    if parent != 0:
        p = nodes[parent]
        out.parent_kernel_uri = B.kernel_uri(sid, parent)
        out.parent_evaluation = B.evaluation_summary(p.evaluation, p.verdict, p.speedup, p.reward)
        if kind == "small":
            out.parent_kernel = p.kernel_source
    if kind == "small":
        out.working_memory = B.kernel_refs(sid, memory_ids, nodes, omit={parent})  # type: ignore[arg-type]
    else:
        out.pool = B.kernel_refs(sid, pool_ids, nodes)  # type: ignore[arg-type]
    return out


def done_brief(search: SearchRecord, tree: Tree, timing_available: bool, gpu: str | None) -> StepBrief:
    best = best_summary(search.search_id, tree)
    if best is None:
        text = "The budget is spent and no kernel was correct."
    else:
        text = (f"The budget is spent. The best kernel is node {best.node_id} (speedup "
                f"{best.speedup if best.speedup is not None else 'not timed'}); best_kernel returns it.")
    return StepBrief(search_id=search.search_id, done=True, strategy=search.strategy,
                     timing_available=timing_available, gpu=gpu, instructions=text, budget=search.budget,
                     steps_used=search.steps_used, steps_left=0, best=best)


def best_summary(search_id: str, tree: Tree) -> BestSummary | None:
    if tree.best is None:
        return None
    n = tree.nodes[tree.best]
    return BestSummary(node_id=n.node_id, speedup=n.speedup, reward=round(n.reward, 6),
                       kernel_uri=B.kernel_uri(search_id, n.node_id))


def summary(search: SearchRecord, open_steps: Sequence[str]) -> SearchSummary:
    """The search's counters and best, with the steps out (handed out, not yet expanded), oldest first."""
    return SearchSummary(
        search_id=search.search_id, task_id=search.task_id, strategy=search.strategy, budget=search.budget,
        seed=search.seed, steps_used=search.steps_used, steps_left=search.steps_left,
        done=search.steps_used >= search.budget, best_node_id=search.best_node_id, best_speedup=search.best_speedup,
        pending_step_id=open_steps[0] if open_steps else None, pending_step_ids=list(open_steps),
        created_at=search.created_at, updated_at=search.updated_at)


def tree_view(search: SearchRecord, records: Sequence[NodeRecord], open_steps: Sequence[str],
              include_sources: bool) -> SearchTree:
    """The whole tree; sources (when asked for) within TREE_SOURCE_CHARS in all, each full one at its URI."""
    nodes: list[NodeView] = []
    budget = TREE_SOURCE_CHARS
    for r in records:
        n = NodeView(node_id=r.node_id, step_index=r.node_id, parent_id=r.parent_id, kind=r.kind, depth=r.depth,
                     verdict=r.verdict, speedup=r.speedup, reward=r.reward, visits=r.visits,
                     speedups=_yardsticks(r),
                     total_reward=r.total_reward, mean_reward=r.total_reward / r.visits if r.visits else 0.0,
                     max_reward=r.max_reward, note=r.note, created_at=r.created_at,
                     kernel_source=budgeted_source(r.kernel_source if include_sources else None, budget))
        if n.kernel_source:
            budget -= len(n.kernel_source)
        nodes.append(n)
    # The best node after each step (the root included, as step 0); 1.0 while that node is untimed.
    curve = [None if b is None else (b.speedup if b.speedup is not None else 1.0) for b in running_best(nodes)]
    return SearchTree(**summary(search, open_steps).model_dump(), params=search.search_params,
                      nodes=nodes, best_curve=curve)


def _yardsticks(r: NodeRecord) -> Speedups | None:
    return speedups.of_columns(r.speedup, r.speedup_tf32, r.speedup_compile, r.pct_roofline, r.bound)


def budgeted_source(source: str | None, budget: int) -> str | None:
    """A node's source trimmed to the per-kernel and remaining whole-tree budgets (results stay compact)."""
    if not source or budget <= len(B.TRUNCATION_MARK):
        return None
    limit = min(B.KERNEL_CHARS, budget)
    return source if len(source) <= limit else source[: limit - len(B.TRUNCATION_MARK)] + B.TRUNCATION_MARK
