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

import random

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


def test_pool_takes_the_best_correct_kernel_of_each_large_steps_small_subtree_on_the_path(tree):
    rng = random.Random(0)
    # path root -> 8: large nodes 1 and 7. Small subtree of 1: {1,2,3,4,5,6,9}, best correct = 2 (2.0x);
    # small subtree of 7: {7,8}, best = 8 (3.0x).
    assert representative_pool(tree, 8, rng) == [2, 8]
    assert representative_pool(tree, 6, rng) == [2]
    assert representative_pool(tree, 9, rng) == [2]


def test_pool_never_holds_a_failed_kernel_and_is_empty_from_the_root(tree):
    rng = random.Random(0)
    assert representative_pool(tree, 0, rng) == []
    assert representative_pool(tree, 10, rng) == []  # 10 failed and has no correct descendant


def test_pool_is_capped_at_five_by_a_seeded_choice_that_keeps_path_order():
    t = Tree.new()
    parent = 0
    for k in range(8):  # a chain of 8 large steps, all correct
        parent = grow(t, parent, "large", speedup=1.0 + k)
    full = representative_pool(t, parent, random.Random(0), size=100)
    assert full == list(range(1, 9))
    picked = representative_pool(t, parent, random.Random(42))
    assert len(picked) == 5 and picked == sorted(picked) and set(picked) <= set(full)
    assert representative_pool(t, parent, random.Random(42)) == picked
