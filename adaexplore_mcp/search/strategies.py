"""The three strategies of SEARCH.md: where the next step grows the tree, and with what kind of step.

- adaexplore: UCT selection with the "open a new child" arm, then the step rule (root large; else large
  after 2 small children or with probability 0.2), pool for large steps, working memory for small steps.
- iterative_refinement: one large step from the root, then only small steps extending the latest node.
- parallel_sampling: only large steps from the root, no pool.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from adaexplore_mcp.search.memory_pool import representative_pool
from adaexplore_mcp.search.tree import ROOT, StepKind, Tree, choose_step, select
from adaexplore_mcp.search.types import SearchParams


@dataclass(frozen=True)
class Plan:
    parent_id: int
    kind: StepKind
    pool: list[int]  # node ids shown to a large step


def step_rng(seed: int, counter: int, task_id: str = "") -> random.Random:
    """The random source of one step, derived from (task, seed, step counter): replayable (the same task, seed and
    calls give the same tree, in any store), nothing to persist. The task is in it so that searches of different
    tasks started with one seed (a campaign's, or every user's default) draw apart: from (seed, counter) alone,
    seed 0 drew nothing under 0.2 at counters 4 to 13, and none of a campaign's 12 adaexplore searches, on 6
    tasks, took a large step off the root in its first 12 steps."""
    return random.Random(f"{task_id}:{seed}:{counter}" if task_id else f"{seed}:{counter}")


def plan_adaexplore(tree: Tree, params: SearchParams, rng: random.Random) -> Plan:
    p = select(tree, c=params.c, c_e=params.c_e, alpha=params.alpha)
    kind = choose_step(tree, p, rng, p_large=params.p_large, max_small_children=params.max_small_children)
    pool = representative_pool(tree, p, params.pool_size) if kind == "large" else []
    return Plan(p, kind, pool)


def plan_iterative_refinement(tree: Tree, params: SearchParams, rng: random.Random) -> Plan:
    if len(tree) == 1:
        return Plan(ROOT, "large", [])
    return Plan(len(tree) - 1, "small", [])


def plan_parallel_sampling(tree: Tree, params: SearchParams, rng: random.Random) -> Plan:
    return Plan(ROOT, "large", [])


PLANNERS = {
    "adaexplore": plan_adaexplore,
    "iterative_refinement": plan_iterative_refinement,
    "parallel_sampling": plan_parallel_sampling,
}


def plan_step(strategy: str, tree: Tree, params: SearchParams, seed: int, counter: int, task_id: str) -> Plan:
    return PLANNERS[strategy](tree, params, step_rng(seed, counter, task_id))
