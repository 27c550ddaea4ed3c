"""Resources (addressable by URI template) and the `optimize_module` prompt."""

from __future__ import annotations

from typing import Annotated

from mcp.server import MCPServer
from mcp.types import Completion, CompletionArgument
from pydantic import Field

from adaexplore_mcp.errors import NotFound, quote
from adaexplore_mcp.prompts import MAX_BUDGET, checked_arguments, optimize_module
from adaexplore_mcp.surface.common import GetApp, prompt_errors, resource_errors


MAX_COMPLETIONS = 100  # the protocol's limit per completion response


def rules_markdown(app_rules: list) -> str:
    lines = ["# adaexplore-mcp validity rules", "", "Active rules first; count = failures in the rule's clusters.", ""]
    for rule in app_rules:
        lines.append(f"- **{rule.rule_id}** ({rule.status}, {rule.count} failures): {rule.text}")
    return "\n".join(lines) + "\n"


def register(mcp: MCPServer, get_app: GetApp) -> None:
    @mcp.resource("adaexplore://tasks/{task_id}/reference", mime_type="text/x-python")
    def task_reference(task_id: str) -> str:
        """A task's reference source (KernelBench format)."""
        with resource_errors((task_id,)):
            return get_app().tasks.spec(task_id).source

    @mcp.resource("adaexplore://searches/{search_id}/nodes/{node_id}/kernel", mime_type="text/x-python")
    def node_kernel(search_id: str, node_id: str) -> str:
        """The full kernel source of one node of a search."""
        with resource_errors((search_id, node_id)):
            if not (node_id.isascii() and node_id.isdigit()):
                raise NotFound(f"node_id must be a whole number (a node of the search's tree), got {quote(node_id)}")
            if len(node_id) > 18:
                raise NotFound(f"search {quote(search_id)} has no node {quote(node_id, 40)}")
            return get_app().search.node_kernel(search_id, int(node_id))

    @mcp.resource("adaexplore://searches/{search_id}/tree", mime_type="application/json")
    def search_tree(search_id: str) -> str:
        """A search's whole tree as JSON (without kernel sources)."""
        with resource_errors((search_id,)):
            return get_app().search.get_search(search_id).model_dump_json()

    @mcp.resource("adaexplore://searches/{search_id}/best", mime_type="text/x-python")
    def best_kernel(search_id: str) -> str:
        """The best kernel of a search as a standalone KernelBench file."""
        with resource_errors((search_id,)):
            return get_app().export_kernel(search_id).source

    @mcp.resource("adaexplore://searches/{search_id}/report.html", mime_type="text/html")
    def report(search_id: str) -> str:
        """The HTML report of a search (best speedup over steps and the tree)."""
        with resource_errors((search_id,)):
            path = get_app().search_report(search_id, png=False).html_path
            with open(path, encoding="utf-8") as fh:
                return fh.read()

    @mcp.resource("adaexplore://evaluations/{eval_id}", mime_type="application/json")
    def evaluation(eval_id: str) -> str:
        """One stored evaluation, as JSON."""
        with resource_errors((eval_id,)):
            return get_app().evaluation_json(eval_id)

    @mcp.resource("adaexplore://rules", mime_type="text/markdown")
    def rules() -> str:
        """The whole rule memory as Markdown."""
        with resource_errors():
            return rules_markdown(get_app().memory.query_skills(limit=1000).rules)

    @mcp.completion()
    async def complete(ref: object, argument: CompletionArgument, context: object) -> Completion | None:
        """Complete task and search ids in resource URIs as the user types them."""
        app = get_app()
        if argument.name == "task_id":
            values = [t.task_id for t in app.tasks.list()]
        elif argument.name == "search_id":
            values = [s.search_id for s in app.search.list_searches()]
        else:
            return None
        matches = [v for v in values if v.startswith(argument.value or "")]
        return Completion(values=matches[:MAX_COMPLETIONS], total=len(matches),
                          has_more=len(matches) > MAX_COMPLETIONS)

    def optimize_module_prompt(
        module_source: Annotated[str, Field(description="the PyTorch module to optimize (Python source); optional")]
        = "",
        budget: Annotated[str | int, Field(description=f"kernels to write in the search, 1 to {MAX_BUDGET}")] = 20,
    ) -> str:
        """A bad argument is an invalid-params error that says what to send, not "Internal server error"."""
        with prompt_errors():
            source, steps = checked_arguments(module_source, budget, get_app().settings.max_source_bytes)
            return optimize_module(source, steps)

    mcp.prompt(name="optimize_module", description="Optimize a PyTorch module with Triton kernels: the full "
               "create_task -> search -> export loop with this server.")(optimize_module_prompt)
