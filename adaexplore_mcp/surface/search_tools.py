"""The search: start_search, next_step, expand_node (+ submit_expand), expand_nodes, get_search, best_kernel,
list_searches, export_kernel, search_report."""

from __future__ import annotations

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from adaexplore_mcp.errors import UserError, quote
from adaexplore_mcp.jobs import Job
from adaexplore_mcp.models import ExportedKernel, SearchReport
from adaexplore_mcp.search import BestKernel, Edit, ExpandResult, SearchSummary, SearchTree, StepBrief
from adaexplore_mcp.search.types import MAX_BUDGET, MAX_STEPS_AT_ONCE, ExpandBatch, ExpandItem
from adaexplore_mcp.surface.common import ADDITIVE, IDEMPOTENT, READ_ONLY, GetApp, run_blocking


class StartedSearch(BaseModel):
    search_id: str
    task_id: str
    strategy: str
    budget: int
    seed: int
    timing_available: bool = Field(description="false under the CPU interpreter: correct nodes count as speedup 1")
    next: str = "call next_step(search_id) for the first brief, then expand_node(..., next=1) for each step"


class SearchList(BaseModel):
    searches: list[SearchSummary]
    total: int = Field(default=0, description="searches there are (of the task); `searches` holds the newest `limit`")


def trimmed(tree: SearchTree, max_nodes: int) -> SearchTree:
    """The tree with at most `max_nodes` nodes, in their order: the root, the best node's path, then the newest
    (a 100-node tree was 85,000 characters, and budgets go to 10,000)."""
    if len(tree.nodes) <= max_nodes:
        return tree
    by_id = {n.node_id: n for n in tree.nodes}
    keep: list[int] = [0]
    node = by_id.get(tree.best_node_id) if tree.best_node_id is not None else None
    while node is not None and node.node_id not in keep:
        keep.append(node.node_id)
        node = by_id.get(node.parent_id) if node.parent_id is not None else None
    for n in sorted(tree.nodes, key=lambda n: n.step_index, reverse=True):
        if len(keep) >= max_nodes:
            break
        if n.node_id not in keep:
            keep.append(n.node_id)
    chosen = set(keep[:max_nodes])  # the best path alone may be longer
    nodes = [n for n in tree.nodes if n.node_id in chosen]
    return tree.model_copy(update={"nodes": nodes, "omitted_nodes": len(tree.nodes) - len(nodes)})


EXPAND_DOC = f"""Answer the pending step of a search with your kernel: `edits`, a list of {{"old": ..., "new": ...}}
exact replacements applied in order to the brief's parent_kernel (each `old` must occur exactly once, else nothing
is added and the step stays pending), or a full `kernel_source` (a complete ModelNew; required for a large step).
`note`: one line on what you tried. The server evaluates the kernel (as evaluate_kernel), adds the node and
returns node_id, the evaluation, reward, best, is_new_best and steps_left. `next=k` (0-{MAX_STEPS_AT_ONCE}, true
= 1): the result also carries the next k briefs in `next_step`, so one call per step is enough. A kernel identical
to a node of this search is not run again (`duplicate_of`). A step id is used once; a step not expanded within
the step lease (30 minutes; ADAEXPLORE_STEP_LEASE_S) of the next_step that handed it out expires."""

NEXT_STEP_DOC = f"""The brief for the next step of a search: step_id, kind ('small': edit `parent_kernel`, guided by
`working_memory`, the recent chain with verdicts and errors; 'large': write a new kernel to beat the `pool` of the
best kernels of other branches), the `rules` most relevant to it, the task and steps_left; `done` when the budget is
spent. Called again before expand_node, it returns the same step as a stub (`already_sent`: you have its brief;
`resend=true` repeats it whole). Cheap. `count` (1-{MAX_STEPS_AT_ONCE}): steps to work on at once; the steps out
come first, then new ones; the first brief fills the result, the others are in `more_steps` without the fields
they share with it (named in `same_as_first`), and a step grown from the parent of an earlier step of the answer
names that step in `same_parent_as` instead of repeating the parent's kernel and memory."""

EXPAND_NODES_DOC = f"""Answer several steps of one search in one call: `items` is a list of 1-{MAX_STEPS_AT_ONCE}
{{"step_id", "kernel_source" or "edits", "note"}}, each as in expand_node. The kernels are evaluated together;
`results` has one entry per item, in order: ok with the expand_node result, or ok=false with that item's error
(the other items are unaffected). `next=k` (0-{MAX_STEPS_AT_ONCE}): also hand out the next k briefs in
`next_step`, so one call per round is enough."""

START_DOC = f"""Start a kernel search on a task. `budget`: the number of kernels (steps) you will write, a whole
number from 1 to {MAX_BUDGET} (20-100 is typical). `strategy`: 'adaexplore' (tree search alternating small edits
and fresh kernels; default), 'iterative_refinement' (one chain of edits) or 'parallel_sampling' (independent
fresh kernels). `seed` (a 64-bit integer) makes the server's choices replayable. `constants` overrides the
search's constants by name (e.g. {{"pool_size": 3, "max_rules": 0}}; get_search shows them all). Cheap. Then loop:
expand_node(..., next=1) after the first next_step."""


def next_count(next: int | bool) -> int:
    """`next` as a count of briefs: an integer from 0 to MAX_STEPS_AT_ONCE; true (the old flag) is 1.

    Checked before the kernel is evaluated, so a bad value adds no node."""
    if isinstance(next, bool):
        return int(next)
    if not isinstance(next, int) or not 0 <= next <= MAX_STEPS_AT_ONCE:
        raise UserError(f"next must be a whole number of briefs from 0 to {MAX_STEPS_AT_ONCE} (e.g. next=1), "
                        f"got {quote(next)}")
    return next


def register(mcp: MCPServer, get_app: GetApp) -> None:
    def start_search(task_id: str, budget: int, seed: int = 0, strategy: str = "adaexplore",
                     constants: dict[str, float] | None = None) -> StartedSearch:
        app = get_app()
        search_id = app.search.start_search(task_id, budget, seed, strategy, **(constants or {}))
        return StartedSearch(search_id=search_id, task_id=task_id, strategy=strategy, budget=budget, seed=seed,
                             timing_available=app.search.timing_available)

    mcp.tool(description=START_DOC, annotations=ADDITIVE)(start_search)

    def next_step(search_id: str, count: int = 1, resend: bool = False) -> StepBrief:
        return get_app().search.next_step(search_id, count, resend)

    mcp.tool(description=NEXT_STEP_DOC, annotations=IDEMPOTENT)(next_step)

    async def expand_node(
        search_id: str,
        step_id: str,
        kernel_source: str | None = None,
        edits: list[Edit] | None = None,
        note: str = "",
        next: int | bool = 0,
        ctx: Context | None = None,
    ) -> ExpandResult:
        count = next_count(next)
        return await run_blocking(ctx, get_app().search.expand_node, search_id, step_id, kernel_source, edits, note,
                                  next=count)

    mcp.tool(description=EXPAND_DOC, annotations=ADDITIVE)(expand_node)

    async def expand_nodes(search_id: str, items: list[ExpandItem], next: int = 0,
                           ctx: Context | None = None) -> ExpandBatch:
        return await run_blocking(ctx, get_app().search.expand_nodes, search_id, items, next_count(next))

    mcp.tool(description=EXPAND_NODES_DOC, annotations=ADDITIVE)(expand_nodes)

    @mcp.tool(annotations=ADDITIVE)
    def submit_expand(
        search_id: str, step_id: str, kernel_source: str | None = None, edits: list[Edit] | None = None,
        note: str = "", next: int | bool = 0,
    ) -> Job:
        """Same as expand_node but returns a job_id at once; poll get_job(job_id) until 'done' (its result is the
        expand_node result). For clients that time out calls after ~60 s (e.g. CPU interpreter runs)."""
        app = get_app()
        app.search.summary(search_id)  # unknown searches fail now, not in the background
        count = next_count(next)
        return app.jobs.submit(
            "expand", lambda progress: app.search.expand_node(search_id, step_id, kernel_source, edits, note,
                                                              progress=progress, next=count)
        )

    @mcp.tool(annotations=READ_ONLY)
    def get_search(search_id: str, include_sources: bool = False, max_nodes: int = 100) -> SearchTree:
        """The tree of a search: nodes with parent, kind, verdict, speedup, visits, rewards and note, the
        best-speedup curve and the search's constants. At most `max_nodes` nodes (the root, the best path, then the
        newest; the resource adaexplore://searches/{search_id}/tree has all). Kernel sources only with
        include_sources (or adaexplore://searches/{search_id}/nodes/{node_id}/kernel). Cheap."""
        if not 1 <= max_nodes <= 1000:
            raise UserError(f"max_nodes must be between 1 and 1000, got {max_nodes}")
        return trimmed(get_app().search.get_search(search_id, include_sources), max_nodes)

    @mcp.tool(annotations=READ_ONLY)
    def best_kernel(search_id: str) -> BestKernel:
        """The best correct kernel of a search (highest speedup over the whole tree) with its source and
        evaluation. A tool error when no node is correct yet. Cheap."""
        return get_app().search.best_kernel(search_id)

    @mcp.tool(annotations=READ_ONLY)
    def list_searches(task_id: str | None = None, limit: int = 50) -> SearchList:
        """The newest `limit` searches (optionally of one task), oldest first: strategy, budget, steps used and
        left, best speedup; `total` says how many there are. Cheap."""
        if not 1 <= limit <= 500:
            raise UserError(f"limit must be between 1 and 500, got {limit}")
        searches = get_app().search.list_searches(task_id)
        return SearchList(searches=searches[-limit:], total=len(searches))

    @mcp.tool(annotations=IDEMPOTENT)
    def export_kernel(search_id: str) -> ExportedKernel:
        """Write the best kernel of a search as a standalone KernelBench file (the reference, get_inputs,
        get_init_inputs and your ModelNew, with a header giving the speedup and GPU); returns its path and text."""
        return get_app().export_kernel(search_id)

    @mcp.tool(annotations=IDEMPOTENT)
    async def search_report(search_id: str, ctx: Context | None = None) -> SearchReport:
        """A report of a search: an HTML page (best speedup over steps, the tree with verdict and speedup per
        node) and a PNG; returns their paths, the HTML's resource URI and a summary. About a second."""
        return await run_blocking(ctx, lambda progress: get_app().search_report(search_id))
