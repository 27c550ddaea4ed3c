"""The search: tree, UCT selection, step choice, working memory, representative pool, strategies.

`SearchService` is the entry point; it is given an `Evaluator` (search/evaluator.py) and a store, and its
tables are the migrations in `MIGRATIONS` (searches, nodes, steps, claims, the node-evaluation link),
which the app hands to the store with every other part's. `tree`, `memory_pool` and `strategies` are the
pure algorithm.
"""

from adaexplore_mcp.search.evaluator import Evaluator
from adaexplore_mcp.search.repository import MIGRATIONS
from adaexplore_mcp.search.service import SearchService
from adaexplore_mcp.search.types import (
    STRATEGIES, BestKernel, Edit, ExpandResult, SearchParams, SearchSummary, SearchTree, StepBrief,
)

__all__ = ["MIGRATIONS", "STRATEGIES", "BestKernel", "Edit", "Evaluator", "ExpandResult", "SearchParams",
           "SearchService", "SearchSummary", "SearchTree", "StepBrief"]
