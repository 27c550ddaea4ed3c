"""What the proposer is shown besides the task: working memory (small steps), representative pool (large).

Pure functions on the in-memory tree, returning node ids; search/brief.py turns ids into what the model reads
(the working memory's parent whole, its older nodes as diffs against the next; pool kernels trimmed).
"""

from __future__ import annotations

import random

from adaexplore_mcp.search.tree import MEMORY_SIZE, POOL_SIZE, Tree


def refinement_chain(tree: Tree, p: int, limit: int | None = None) -> list[int]:
    """The chain from p's nearest large-step ancestor (inclusive) down to p, oldest first.

    With `limit`, only its last `limit` nodes (the walk up stops there: chains can be thousands long).
    """
    chain: list[int] = []
    current = tree.nodes[p]
    while limit is None or len(chain) < limit:
        if current.kind == "root":
            break
        chain.append(current.node_id)
        if current.kind != "small" or current.parent_id is None:
            break
        current = tree.nodes[current.parent_id]
    chain.reverse()
    return chain


def working_memory(tree: Tree, p: int, size: int = MEMORY_SIZE) -> list[int]:
    """The last `size` nodes of p's refinement chain (oldest first, p last). Failed nodes included."""
    if size <= 0:
        return []
    return refinement_chain(tree, p, limit=size)


def representative_pool(tree: Tree, p: int, rng: random.Random, size: int = POOL_SIZE) -> list[int]:
    """For each large-step node on the path root -> p: the best correct kernel in its small-step subtree.

    The small-step subtree of a large node L is L plus the descendants reached only through small steps
    (exactly the nodes whose anchor is L). Failed kernels never enter; from the root the pool is empty.
    At most `size` entries: a seeded random choice (kept in path order) when there are more.
    """
    path = list(reversed(tree.path_to_root(p)))  # root first
    pool = []
    for i in path:
        if tree.nodes[i].kind != "large":
            continue
        best = tree.anchor_best.get(i)
        if best is not None and best not in pool:
            pool.append(best)
    if len(pool) > size:
        keep = set(rng.sample(range(len(pool)), size))
        pool = [n for k, n in enumerate(pool) if k in keep]
    return pool
