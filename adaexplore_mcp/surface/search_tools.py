"""The search: start_search, next_step, expand_node (+ submit_expand), expand_nodes, get_search, best_kernel,
list_searches, export_kernel, search_report."""

from __future__ import annotations

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from adaexplore_mcp.errors import UserError
from adaexplore_mcp.jobs import Job
from adaexplore_mcp.models import ExportedKernel, SearchReport
from adaexplore_mcp.search import BestKernel, Edit, ExpandResult, SearchSummary, SearchTree, StepBrief
from adaexplore_mcp.search.types import ExpandBatch, ExpandItem
from adaexplore_mcp.surface.common import ADDITIVE, IDEMPOTENT, READ_ONLY, GetApp, run_blocking


class StartedSearch(BaseModel):
    search_id: str
    task_id: str
    strategy: str
    budget: int
    seed: int
    timing_available: bool = Field(description="false under the CPU interpreter: correct nodes count as speedup 1")
    next: str = "call next_step(search_id) for the first brief"


class SearchList(BaseModel):
    searches: list[SearchSummary]
    total: int = Field(default=0, description="searches there are (of the task); `searches` holds the newest `limit`")


def trimmed(tree: SearchTree, max_nodes: int) -> SearchTree:
    """The tree with at most `max_nodes` nodes, in their order: the root, the best node's path, then the newest
    (red team, round five: a 100-node tree was 85,000 characters, and budgets go to 10,000)."""
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


EXPAND_DOC = """Answer the pending step of a search with your kernel. For a small step send `edits`, a list of
{"old": ..., "new": ...} exact replacements applied in order to the brief's parent_kernel (each `old` must occur
exactly once; otherwise nothing is added and the step stays pending), or a full `kernel_source`; a large step
needs a full `kernel_source` (a complete ModelNew). `note`: one line on what you tried. The server evaluates
the kernel (same judge as evaluate_kernel: seconds on a GPU, longer under the CPU interpreter), adds the node,
backpropagates its reward and returns node_id, the evaluation, the reward, the best so far, is_new_best and
steps_left. A step id is used once. `next=true`: the result also carries the next brief in `next_step` (what
next_step(search_id) would return), so one call per step is enough. A kernel identical to a node already in this
search (ignoring trailing whitespace and blank lines) is not run again: its stored evaluation is reused, the
step still counts, `duplicate_of` names that node and `warnings` says so. A step not expanded within 30 minutes
of the next_step that handed it out expires: expanding it then is an error; call next_step for a new one."""

NEXT_STEP_DOC = """Get the brief for the next step of a search: step_id, kind ('small': edit the parent kernel, guided
by `working_memory`, the recent chain with verdicts and errors; 'large': write a new kernel meant to beat the `pool`
of the best kernels of other branches), `rules` every kernel must respect, the task, instructions and steps_left.
Calling it again before expand_node returns the same step, as a stub naming its step_id (`already_sent`: you have its
brief; `resend=true` repeats it whole). When the budget is spent, `done` is true and the brief
names the best node. Cheap.
`count` (1-8, default 1) is how many steps you work on at once, e.g. to write several kernels in parallel: the
steps already handed out and not yet expanded come first, then new ones until `count` are out (never past the
budget); the first brief fills the result's fields, the others are in `more_steps` without the fields they share
with the first (named in each one's `same_as_first`: task, reference, instructions, rules...). Steps handed out together are
spread over the tree (a step out counts as a visit of the node it grows until it is expanded). Each step must be
expanded within the step lease (30 minutes unless the server sets ADAEXPLORE_STEP_LEASE_S) of the last next_step
that returned it, or it expires. Replay: the same seed and the
same sequence of calls (counts, and expansions in the same order with the same results) give the same tree."""

EXPAND_NODES_DOC = """Answer several steps of one search in one call: `items` is a list of 1-8 {"step_id",
"kernel_source" or "edits", "note"}, each as in expand_node (get the steps with next_step(count=k)). The kernels
are evaluated at the same time; `results` has one entry per item, in order: ok with the expand_node result, or
ok=false with that item's error (a bad edit, a step already used or expired...), which leaves the other items
unaffected. `next` (0-8): also hand out that many next briefs (as next_step(count=next)) in `next_step`."""


def register(mcp: MCPServer, get_app: GetApp) -> None:
    @mcp.tool(annotations=ADDITIVE)
    def start_search(task_id: str, budget: int, seed: int = 0, strategy: str = "adaexplore",
                     constants: dict[str, float] | None = None) -> StartedSearch:
        """Start a kernel search on a task. `budget` is the number of kernels (steps) you will write, e.g. 20-100.
        `strategy`: 'adaexplore' (tree search: the server alternates small edits and fresh kernels; default),
        'iterative_refinement' (one chain of edits) or 'parallel_sampling' (independent fresh kernels).
        `seed` makes the server's choices replayable: any integer from -2**63 to 2**63-1, stored as given (a seed
        outside that range is an error, not reduced). `constants` overrides the search's constants by name (e.g.
        {"pool_size": 3, "max_rules": 0}; get_search shows them all). Cheap. Then loop: next_step -> expand_node."""
        app = get_app()
        search_id = app.search.start_search(task_id, budget, seed, strategy, **(constants or {}))
        return StartedSearch(search_id=search_id, task_id=task_id, strategy=strategy, budget=budget, seed=seed,
                             timing_available=app.search.timing_available)

    def next_step(search_id: str, count: int = 1, resend: bool = False) -> StepBrief:
        return get_app().search.next_step(search_id, count, resend)

    mcp.tool(description=NEXT_STEP_DOC, annotations=IDEMPOTENT)(next_step)

    async def expand_node(
        search_id: str,
        step_id: str,
        kernel_source: str | None = None,
        edits: list[Edit] | None = None,
        note: str = "",
        next: bool = False,
        ctx: Context | None = None,
    ) -> ExpandResult:
        return await run_blocking(ctx, get_app().search.expand_node, search_id, step_id, kernel_source, edits, note,
                                  next=next)

    mcp.tool(description=EXPAND_DOC, annotations=ADDITIVE)(expand_node)

    async def expand_nodes(search_id: str, items: list[ExpandItem], next: int = 0,
                           ctx: Context | None = None) -> ExpandBatch:
        return await run_blocking(ctx, get_app().search.expand_nodes, search_id, items, next)

    mcp.tool(description=EXPAND_NODES_DOC, annotations=ADDITIVE)(expand_nodes)

    @mcp.tool(annotations=ADDITIVE)
    def submit_expand(
        search_id: str, step_id: str, kernel_source: str | None = None, edits: list[Edit] | None = None,
        note: str = "", next: bool = False,
    ) -> Job:
        """Same as expand_node but returns a job_id at once; poll get_job(job_id) until 'done' (its result is the
        expand_node result). For clients that time out calls after ~60 s (e.g. CPU interpreter runs)."""
        app = get_app()
        app.search.summary(search_id)  # unknown searches fail now, not in the background
        return app.jobs.submit(
            "expand", lambda progress: app.search.expand_node(search_id, step_id, kernel_source, edits, note,
                                                              progress=progress, next=next)
        )

    @mcp.tool(annotations=READ_ONLY)
    def get_search(search_id: str, include_sources: bool = False, max_nodes: int = 100) -> SearchTree:
        """The tree of a search: nodes with parent, kind, verdict, speedup, visits, rewards and note, the
        best-speedup curve over steps, and the search's constants. At most `max_nodes` nodes (the root, the best
        node and its ancestors, then the newest); `omitted_nodes` counts the rest, and the resource
        adaexplore://searches/{search_id}/tree holds them all. Kernel sources only with include_sources
        (large: prefer the resource adaexplore://searches/{search_id}/nodes/{node_id}/kernel). Cheap."""
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
        """Write the best kernel of a search as a standalone KernelBench-format file (the task's reference,
        get_inputs, get_init_inputs and your ModelNew, with a header giving the speedup and GPU) and return its
        path and text. Cheap."""
        return get_app().export_kernel(search_id)

    @mcp.tool(annotations=IDEMPOTENT)
    async def search_report(search_id: str, ctx: Context | None = None) -> SearchReport:
        """Make a report of a search: an HTML page (plot of best speedup over steps, the tree with kind,
        verdict and speedup per node) and the same as a PNG. Returns the file paths, the resource URI of the
        HTML and a summary. About a second."""
        return await run_blocking(ctx, lambda progress: get_app().search_report(search_id))
