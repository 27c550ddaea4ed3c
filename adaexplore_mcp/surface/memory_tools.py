"""The skill memory: query_skills, failure_clusters, add/update/retire/merge rules, synthesize_tasks."""

from __future__ import annotations

from mcp.server import MCPServer
from mcp.server.mcpserver import Context

from adaexplore_mcp.jobs import Job
from pydantic import Field

from adaexplore_mcp.memory.rules import RULE_MAX_CHARS
from adaexplore_mcp.memory.types import ClusterList, RuleInfo, SkillQuery
from adaexplore_mcp.models import TaskList
from adaexplore_mcp.search.brief import MAX_RULES
from adaexplore_mcp.surface.common import ADDITIVE, IDEMPOTENT, READ_ONLY, GetApp, run_blocking


class ClusterAnswer(ClusterList):
    """The clusters, and why there are none when there are none (an empty list read as "no failures")."""

    note: str | None = Field(default=None, description="why `clusters` is empty, and what to call instead")


def empty_note(ripe_only: bool, unripe: int) -> str:
    """What an empty answer means: no failures yet, or failures in clusters that are not ripe."""
    if not ripe_only or unripe == 0:
        return ("no failures recorded yet: every failed evaluation (evaluate_kernel, expand_node) is grouped here "
                "by its error signature")
    return (f"no ripe cluster (3+ failures from 2+ tasks, no rule yet); {unripe} unripe cluster"
            f"{'s' if unripe > 1 else ''}: failure_clusters(ripe_only=false) lists them, and add_rule accepts any")


ADD_RULE_DOC = f"""Write the validity rule for a failure cluster: one sentence starting 'You cannot ...' or 'Always ...'
(at most {RULE_MAX_CHARS} characters), general enough to hold for any kernel and task. Later briefs show the
{MAX_RULES} rules most relevant to their step (this one when it is among them) and count the others; every
evaluation whose failure falls in the cluster names it."""


def register(mcp: MCPServer, get_app: GetApp) -> None:
    @mcp.tool(annotations=READ_ONLY)
    def query_skills(text: str = "", task_id: str | None = None, limit: int = 20) -> SkillQuery:
        """Search the validity rules learnt from failed kernels (shared by every session on this machine):
        active rules first, then the most relevant to `text` (e.g. an error message or 'tl.dot') or to a
        task's ops, then the most frequent. Each rule has rule_id, text, count and provenance. Cheap."""
        return get_app().memory.query_skills(text, task_id, limit)

    @mcp.tool(annotations=READ_ONLY)
    def failure_clusters(ripe_only: bool = True) -> ClusterAnswer:
        """Recurring failures grouped by normalized error signature; by default only ripe clusters (3+ failures
        from 2+ tasks, no rule yet), ripe_only=false for all. A ripe cluster waits for its rule (add_rule): read
        its examples (error line plus offending source line) and state the rule in one sentence. An empty
        answer has a `note` saying why. Cheap."""
        memory = get_app().memory
        answer = ClusterAnswer(clusters=memory.failure_clusters(ripe_only).clusters)
        if not answer.clusters:
            unripe = len(memory.failure_clusters(False).clusters) if ripe_only else 0
            answer.note = empty_note(ripe_only, unripe)
        return answer

    def add_rule(cluster_id: str, text: str) -> RuleInfo:
        return get_app().memory.add_rule(cluster_id, text)

    mcp.tool(annotations=ADDITIVE, description=ADD_RULE_DOC)(add_rule)

    @mcp.tool(annotations=ADDITIVE)
    def update_rule(rule_id: str, text: str, reason: str) -> RuleInfo:
        """Reword a rule; the old text and your reason are kept in its history."""
        return get_app().memory.update_rule(rule_id, text, reason)

    @mcp.tool(annotations=IDEMPOTENT)
    def retire_rule(rule_id: str, reason: str) -> RuleInfo:
        """Stop showing a rule (wrong, obsolete or over-specific); it and its history are kept."""
        return get_app().memory.retire_rule(rule_id, reason)

    @mcp.tool(annotations=ADDITIVE)
    def merge_rules(rule_ids: list[str], text: str, reason: str) -> RuleInfo:
        """Replace several rules that say the same thing with one new rule covering all their clusters; the
        old ones are retired with a pointer to the new one."""
        return get_app().memory.merge_rules(rule_ids, text, reason)

    @mcp.tool(annotations=ADDITIVE)
    async def synthesize_tasks(count: int, seed: int = 0, ctx: Context | None = None) -> TaskList:
        """Make `count` practice tasks (Adapt stage) by mutating and recombining PyTorch operator chains
        (pointwise, activations, reductions, norms, softmax, matmul, conv, pooling) with varied shapes; each is
        run and probed in a worker and kept only if valid and not degenerate, then registered like create_task.
        Seeded and reproducible. Costs a few seconds per task; for large counts use submit_synthesis."""
        return TaskList(tasks=await run_blocking(ctx, get_app().synthesize_tasks, count, seed))

    @mcp.tool(annotations=ADDITIVE)
    def submit_synthesis(count: int, seed: int = 0) -> Job:
        """synthesize_tasks in the background: returns a job_id; poll get_job until 'done'."""
        app = get_app()
        return app.jobs.submit("synthesize", lambda progress: TaskList(
            tasks=app.synthesize_tasks(count, seed, progress)))
