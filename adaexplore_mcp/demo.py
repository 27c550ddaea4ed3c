"""`adaexplore-mcp demo`: a short scripted search on a built-in task, played through the MCP tools.

The scripted proposer stands in for the assistant and talks to an in-process MCP client, so the demo
exercises exactly what an assistant would call, in the loop the `optimize_module` prompt teaches: start_search,
next_step once, then one expand_node(next=1) per step (its result carries the next brief), get_search,
search_report. It prints each step, the tree and the best speedup (under the CPU interpreter it says that every
correct kernel ranks equal instead).
"""

from __future__ import annotations

import sys
import time
from typing import Any

import anyio
from mcp import Client

from adaexplore_mcp.config import Settings
from adaexplore_mcp.search.brief import CPU_HONEST
from adaexplore_mcp.search.proposer import ScriptedProposer, default_templates
from adaexplore_mcp.search.types import StepBrief
from adaexplore_mcp.server import build_server


def _speedup(value: float | None) -> str:
    return "untimed" if value is None else f"{value:.2f}x"


def outcome(best_node_id: int | None, best_speedup: float | None, timed: bool) -> str:
    """The demo's last word. Without timing every correct kernel scores alike, so no "best speedup" is named."""
    if best_node_id is None:
        return "no correct kernel"
    if not timed or best_speedup is None:
        return f"{CPU_HONEST if not timed else 'no timed kernel'} (first correct: node {best_node_id})"
    return f"best: node {best_node_id}, speedup {_speedup(best_speedup)}"


async def _call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        raise RuntimeError(f"{tool} failed: {result.content[0].text}")
    return result.structured_content


def print_tree(nodes: list[dict[str, Any]], best_node_id: int | None, out=sys.stdout, timed: bool = True) -> None:
    """The tree, one node a line; untimed, the marked node is only the first correct one (all rank equal)."""
    mark = "  <- best" if timed else "  <- first correct"
    children: dict[int | None, list[dict[str, Any]]] = {}
    for node in nodes:
        children.setdefault(node["parent_id"], []).append(node)

    def walk(node: dict[str, Any], depth: int) -> None:
        if node["kind"] == "root":
            label = "root (PyTorch reference)"
        else:
            star = mark if node["node_id"] == best_node_id else ""
            label = (f"#{node['node_id']} {node['kind']:<5} {node['verdict']:<13} {_speedup(node['speedup']):>8}"
                     f"  {node['note'][:60]}{star}")
        print("  " * depth + label, file=out)
        for child in children.get(node["node_id"], []):
            walk(child, depth + 1)

    for root in children.get(None, []):
        walk(root, 0)


async def _demo(task: str, budget: int, seed: int, strategy: str) -> int:
    settings = Settings.from_env()
    proposer = ScriptedProposer(default_templates(task), seed=seed)
    async with Client(build_server(settings), read_timeout_seconds=900) as client:
        started = await _call(client, "start_search", task_id=task, budget=budget, seed=seed, strategy=strategy)
        search_id = started["search_id"]
        timed = bool(started["timing_available"])
        timing = "GPU timing" if timed else CPU_HONEST
        print(f"search {search_id} on {task}: {strategy}, budget {budget}, seed {seed} ({timing})")
        brief = StepBrief.model_validate(await _call(client, "next_step", search_id=search_id))
        while not brief.done:
            proposal = proposer.propose(brief)
            started_at = time.monotonic()
            result = await _call(client, "expand_node", search_id=search_id, step_id=brief.step_id, next=1,
                                 **proposal)
            evaluation = result["evaluation"]  # the lean evaluation: verdict, speedup, the failure's detail
            print(f"step {result['steps_used']:>3}: {brief.kind:<5} from #{brief.parent_node_id:<3} -> "
                  f"#{result['node_id']:<3} {evaluation['verdict']:<13} {_speedup(evaluation.get('speedup')):>8}"
                  f"  ({time.monotonic() - started_at:.1f} s)")
            if result["done"] or not result.get("next_step"):
                break
            brief = StepBrief.model_validate(result["next_step"])
        tree = await _call(client, "get_search", search_id=search_id)
        print("\ntree:")
        print_tree(tree["nodes"], tree["best_node_id"], timed=timed)
        report = await _call(client, "search_report", search_id=search_id)
        print("\n" + outcome(tree["best_node_id"], tree["best_speedup"], timed))
        print(f"report: {report['html_path']}" + (f" and {report['png_path']}" if report["png_path"] else ""))
    return 0


def run_demo(task: str = "scaled_softmax", budget: int = 8, seed: int = 0, strategy: str = "adaexplore") -> int:
    return anyio.run(_demo, task, budget, seed, strategy)
