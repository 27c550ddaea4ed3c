"""Run one whole search with the scripted proposer directly on a SearchService, and summarize it.

Tooling for tests (a search service over a fake evaluator) and bench/search_strategies.py (a real judge): the demo goes
through the MCP tools instead, so this lives outside the installed package.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from adaexplore_mcp.search.proposer import ScriptedProposer, TemplateProvider, default_templates
from adaexplore_mcp.search.types import StepBrief


class ScriptedRunSummary(BaseModel):
    """What one scripted search did: verdict counts, the best node and the best-speedup curve, timings."""

    search_id: str
    task_id: str
    task_name: str
    strategy: str
    budget: int
    seed: int
    steps: int
    correct: int
    verdicts: dict[str, int] = Field(default_factory=dict)
    best_node_id: int | None
    best_speedup: float | None
    best_curve: list[float | None] = Field(description="best correct speedup after each step (index 0 = root)")
    wall_s: float
    evaluation_s: float


def run_scripted_search(service: Any, task_id: str, task_name: str, budget: int, seed: int = 0,
                        strategy: str = "adaexplore", templates: TemplateProvider | None = None,
                        on_step: Callable[[StepBrief, Any], None] | None = None,
                        **constants: float) -> ScriptedRunSummary:
    """Run one whole search with the scripted proposer and summarize it."""
    started = time.perf_counter()
    proposer = ScriptedProposer((templates or default_templates)(task_name), seed=seed)
    search_id = service.start_search(task_id, budget, seed=seed, strategy=strategy, **constants)
    verdicts: dict[str, int] = {}
    eval_s = 0.0
    while True:
        brief = service.next_step(search_id)
        if brief.done:
            break
        t0 = time.perf_counter()
        result = service.expand_node(search_id, brief.step_id, **proposer.propose(brief))
        eval_s += time.perf_counter() - t0
        verdicts[result.evaluation.verdict.value] = verdicts.get(result.evaluation.verdict.value, 0) + 1
        if on_step is not None:
            on_step(brief, result)
    tree = service.get_search(search_id)
    return ScriptedRunSummary(
        search_id=search_id, task_id=task_id, task_name=task_name, strategy=strategy, budget=budget, seed=seed,
        steps=tree.steps_used, correct=verdicts.get("passed", 0), verdicts=verdicts,
        best_node_id=tree.best_node_id, best_speedup=tree.best_speedup, best_curve=tree.best_curve,
        wall_s=round(time.perf_counter() - started, 3), evaluation_s=round(eval_s, 3),
    )
