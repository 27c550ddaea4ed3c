"""Working memory and representative pool, on a tree built by hand.

    root
     +- 1 L passed 1.5
     |   +- 2 S passed 2.0
     |   |   +- 3 S mismatch
     |   |       +- 4 S passed 1.2
     |   |           +- 5 S passed 1.1
     |   |               +- 6 S passed 1.3
     |   |                   +- 7 L passed 0.9
     |   |                       +- 8 S passed 3.0
     |   +- 9 S compile_error
     +- 10 L compile_error
"""

from __future__ import annotations

import pytest

from adaexplore_mcp.search.memory_pool import refinement_chain, representative_pool, working_memory
from adaexplore_mcp.search.tree import Tree, TreeNode, backpropagate


def grow(tree: Tree, parent: int, kind: str, verdict: str = "passed", speedup: float | None = None) -> int:
    node = TreeNode(node_id=len(tree), parent_id=parent, kind=kind, depth=tree.nodes[parent].depth + 1,
                    verdict=verdict, speedup=speedup)
    tree.add(node)
    backpropagate(tree, node.node_id, 0.5)
    return node.node_id


@pytest.fixture
def tree() -> Tree:
    t = Tree.new()
    grow(t, 0, "large", speedup=1.5)  # 1
    grow(t, 1, "small", speedup=2.0)  # 2
    grow(t, 2, "small", verdict="mismatch")  # 3
    grow(t, 3, "small", speedup=1.2)  # 4
    grow(t, 4, "small", speedup=1.1)  # 5
    grow(t, 5, "small", speedup=1.3)  # 6
    grow(t, 6, "large", speedup=0.9)  # 7
    grow(t, 7, "small", speedup=3.0)  # 8
    grow(t, 1, "small", verdict="compile_error")  # 9
    grow(t, 0, "large", verdict="compile_error")  # 10
    return t


def test_working_memory_is_the_last_five_of_the_chain_up_to_the_nearest_large_ancestor(tree):
    assert refinement_chain(tree, 6) == [1, 2, 3, 4, 5, 6]
    assert working_memory(tree, 6) == [2, 3, 4, 5, 6]  # failed node 3 is kept: it is part of the story
    assert working_memory(tree, 3) == [1, 2, 3]
    assert working_memory(tree, 8) == [7, 8]  # stops at the large step 7
    assert working_memory(tree, 7) == [7]
    assert working_memory(tree, 9) == [1, 9]
    assert working_memory(tree, 6, size=2) == [5, 6]


def test_pool_holds_the_best_kernel_of_every_other_branch_never_the_steps_own_lineage(tree):
    # Branches: large 1 (its small subtree {1..6, 9}: best 2, 2.0x), large 7 ({7, 8}: best 8, 3.0x), large 10
    # (no correct kernel). A large step from 8 sits in branches 1 and 7: nothing else is correct, so empty.
    assert representative_pool(tree, 8) == []
    # From 6 (branch 1 only) the other branch 7 offers its best, 8; node 2 (an ancestor) never enters.
    assert representative_pool(tree, 6) == [8]
    assert representative_pool(tree, 9) == [8]
    # From 10 (a failed branch of its own) every other branch counts, best first.
    assert representative_pool(tree, 10) == [8, 2]


def test_pool_from_the_root_is_every_branch_and_never_a_failed_kernel(tree):
    assert representative_pool(tree, 0) == [8, 2]  # 10 failed and has no correct descendant
    empty = Tree.new()
    grow(empty, 0, "large", verdict="compile_error")
    assert representative_pool(empty, 0) == []


def test_pool_is_capped_and_ranked_as_the_search_ranks_kernels():
    t = Tree.new()
    for k in range(8):  # 8 branches from the root, all correct
        grow(t, 0, "large", speedup=[1.5, 3.0, 1.0, 2.0, 2.0, 0.5, 4.0, 1.2][k])
    assert representative_pool(t, 0, size=100) == [7, 2, 4, 5, 1, 8, 3, 6]  # ties (4, 5): the earlier first
    assert representative_pool(t, 0) == [7, 2, 4, 5, 1]
    assert representative_pool(t, 7) == [2, 4, 5, 1, 8]  # a step from 7 is not shown 7
    untimed = Tree.new()
    for _ in range(3):
        grow(untimed, 0, "large")  # CPU: every pass untimed, ties go to the earlier node
    assert representative_pool(untimed, 0, size=2) == [1, 2]
