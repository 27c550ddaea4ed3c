"""What the proposer is shown besides the task: working memory (small steps), representative pool (large).

Pure functions on the in-memory tree, returning node ids; search/brief.py turns ids into what the model reads
(the working memory's parent whole, its older nodes as diffs against the next; pool kernels trimmed).
"""

from __future__ import annotations

from adaexplore_mcp.ranking import rank_key
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


def representative_pool(tree: Tree, p: int, size: int = POOL_SIZE) -> list[int]:
    """The best kernels of other branches, for a large step grown from p: best first.

    A branch is a large-step node with its small-step subtree (the nodes whose anchor it is); its kernel is
    the best correct node in it. The branches whose large node lies on the path root -> p are p's own
    lineage and never enter: the step is shown what the rest of the tree found, not its own parent chain
    (which a large step from p is meant to leave). Failed kernels never enter. From the root every branch is
    "other", so the pool is empty only while no correct kernel exists. At most `size`, ranked as the search
    ranks kernels (adaexplore_mcp.ranking: timed passes by speedup, ties to the earlier node).
    """
    if size <= 0:
        return []
    lineage = set(tree.path_to_root(p))
    bests = [best for anchor, best in tree.anchor_best.items()
             if anchor not in lineage and tree.nodes[anchor].kind == "large"]
    bests.sort(key=lambda n: (tuple(-k for k in rank_key(tree.nodes[n])), n))
    return bests[:size]
