"""The search: tree, UCT selection, step choice, working memory, representative pool, strategies.

Importing this package registers its tables (migration 2: searches, nodes, steps) with the store.
`SearchService` is the entry point; `tree`, `memory_pool` and `strategies` are the pure algorithm.
"""

from adaexplore_mcp.search import repository as _repository

_repository.register()

from adaexplore_mcp.search.service import SearchService  # noqa: E402
from adaexplore_mcp.search.types import (  # noqa: E402
    STRATEGIES, BestKernel, Edit, ExpandResult, SearchParams, SearchSummary, SearchTree, StepBrief,
)

__all__ = ["STRATEGIES", "BestKernel", "Edit", "ExpandResult", "SearchParams", "SearchService", "SearchSummary",
           "SearchTree", "StepBrief"]
