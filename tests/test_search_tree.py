"""The pure algorithm: reward, UCT values checked against numbers computed by hand, step choice, backprop."""

from __future__ import annotations

import math
import random

import pytest

from adaexplore_mcp.search.strategies import step_rng
from adaexplore_mcp.search.tree import (
    Tree, TreeNode, backpropagate, best_node, choose_step, expand_score, q_value, reward, select, ucb,
)


def grow(tree: Tree, parent: int, kind: str, r: float, verdict: str = "passed", speedup: float | None = None) -> int:
    node = TreeNode(node_id=len(tree), parent_id=parent, kind=kind, depth=tree.nodes[parent].depth + 1,
                    verdict=verdict, speedup=speedup, reward=r)
    tree.add(node)
    backpropagate(tree, node.node_id, r)
    return node.node_id


# -- reward ------------------------------------------------------------------------------------

def test_reward_follows_the_published_table():
    assert reward("compile_error", None) == 0.0
    for v in ("runtime_error", "crashed", "timeout", "mismatch", "rejected"):
        assert reward(v, None) == 0.05
    assert reward("passed", 0.1) == pytest.approx(0.4)
    assert reward("passed", 0.01) == pytest.approx(0.4)  # clipped at 0.1
    assert reward("passed", 1.0) == pytest.approx(0.4 + 1.2 * 0.9 / 9.9)  # 0.509090...
    assert reward("passed", 2.0) == pytest.approx(0.630303, abs=1e-6)  # 0.4 + 1.2 * 1.9 / 9.9
    assert reward("passed", 10.0) == pytest.approx(1.6)
    assert reward("passed", 50.0) == pytest.approx(1.6)  # clipped at 10


def test_a_correct_kernel_without_timing_is_scored_as_speedup_one():
    assert reward("passed", None) == pytest.approx(0.509091, abs=1e-6)


# -- UCT, with the numbers written out --------------------------------------------------------
#
#   root (N=4, W=1.25)
#    +- A  r=0.10 (large)  N=3 W=1.20 Q=0.40
#    |   +- A1 r=0.50 (small)  N=2 W=1.10 Q=0.55
#    |       +- A1a r=0.60 (small)  N=1 W=0.60 Q=0.60
#    +- B  r=0.05 (large, failed)  N=1 W=0.05 Q=0.05

@pytest.fixture
def hand_tree() -> Tree:
    t = Tree.new()
    a = grow(t, 0, "large", 0.10)
    a1 = grow(t, a, "small", 0.50)
    grow(t, a1, "small", 0.60)
    grow(t, 0, "large", 0.05, verdict="mismatch")
    return t


def test_statistics_after_backpropagation(hand_tree):
    root, a, a1, a1a, b = hand_tree.nodes
    assert (root.visits, root.total_reward, root.max_reward) == (4, pytest.approx(1.25), 0.60)
    assert (a.visits, a.total_reward, a.max_reward) == (3, pytest.approx(1.20), 0.60)
    assert (a1.visits, a1.total_reward, a1.max_reward) == (2, pytest.approx(1.10), 0.60)
    assert (a1a.visits, b.visits) == (1, 1)


def test_ucb_and_expand_values_match_hand_computation(hand_tree):
    root, a, a1, _, b = hand_tree.nodes
    assert q_value(a) == pytest.approx(0.40)
    assert q_value(a, alpha=0.5) == pytest.approx(0.5 * 0.60 + 0.5 * 0.40)  # 0.50
    # UCB(A) = 0.40 + 0.3 * sqrt(ln 4 / 3) = 0.40 + 0.3 * 0.679778 = 0.603933
    assert ucb(a, root.visits) == pytest.approx(0.603933, abs=1e-6)
    # UCB(B) = 0.05 + 0.3 * sqrt(ln 4 / 1) = 0.05 + 0.3 * 1.177410 = 0.403223
    assert ucb(b, root.visits) == pytest.approx(0.403223, abs=1e-6)
    # E(root) = max(0.40, 0.05) + 0.3 * sqrt(ln 4 / 2^2) = 0.40 + 0.3 * 0.588705 = 0.576611
    assert expand_score(hand_tree, root) == pytest.approx(0.576611, abs=1e-6)
    # UCB(A1) = 0.55 + 0.3 * sqrt(ln 3 / 2) = 0.55 + 0.3 * 0.741152 = 0.772346
    assert ucb(a1, a.visits) == pytest.approx(0.772346, abs=1e-6)
    # E(A) = 0.55 + 0.3 * sqrt(ln 3 / 1^2) = 0.55 + 0.3 * 1.048147 = 0.864444
    assert expand_score(hand_tree, a) == pytest.approx(0.864444, abs=1e-6)


def test_selection_descends_while_a_child_beats_the_new_child_arm_and_stops_otherwise(hand_tree):
    # root: E = 0.576611 < UCB(A) = 0.603933 -> go to A; A: E = 0.864444 > UCB(A1) = 0.772346 -> grow A.
    assert select(hand_tree) == 1
    # With c_e = 0 the new-child arm loses at A (0.55 < 0.772346): go to A1; A1: E = 0.60 + 0 = 0.60,
    # UCB(A1a) = 0.60 + 0.3 * sqrt(ln 2 / 1) = 0.849766 -> go to A1a, a leaf -> grow A1a.
    assert select(hand_tree, c_e=0.0) == 3


def test_unvisited_and_childless_cases_are_infinite():
    t = Tree.new()
    assert ucb(TreeNode(node_id=9, parent_id=0, kind="large", depth=1), 5) == math.inf
    assert expand_score(t, t.root) == math.inf
    assert select(t) == 0  # a leaf is always grown
    one = grow(t, 0, "large", 0.5)
    # root: E = 0.5 + 0.3 * sqrt(ln 1 / 1) = 0.5 and UCB = 0.5 + 0 = 0.5: not strictly greater -> descend
    assert select(t) == one


# -- which step -------------------------------------------------------------------------------

def test_the_root_always_gets_a_large_step():
    t = Tree.new()
    assert all(choose_step(t, 0, random.Random(i), p_large=0.0) == "large" for i in range(50))


def test_a_third_child_after_two_small_children_is_forced_large():
    t = Tree.new()
    a = grow(t, 0, "large", 0.5)
    grow(t, a, "small", 0.5)
    assert choose_step(t, a, random.Random(1), p_large=0.0) == "small"
    grow(t, a, "small", 0.5)
    assert all(choose_step(t, a, random.Random(i), p_large=0.0) == "large" for i in range(50))


def test_large_steps_are_drawn_with_probability_one_fifth():
    t = Tree.new()
    a = grow(t, 0, "large", 0.5)
    draws = [choose_step(t, a, step_rng(seed=7, counter=k)) for k in range(20000)]
    share = draws.count("large") / len(draws)
    assert abs(share - 0.2) < 0.01  # 3 sigma of a binomial(20000, 0.2) share is 0.0085


def test_the_draw_is_a_function_of_seed_and_counter():
    t = Tree.new()
    a = grow(t, 0, "large", 0.5)
    first = [choose_step(t, a, step_rng(3, k)) for k in range(200)]
    again = [choose_step(t, a, step_rng(3, k)) for k in range(200)]
    other = [choose_step(t, a, step_rng(4, k)) for k in range(200)]
    assert first == again and first != other


def test_searches_of_two_tasks_with_one_seed_draw_their_step_kinds_apart():
    """Every search of a campaign had seed 0, and (seed, counter) alone gave them all the same draws: none
    under 0.2 at counters 4-13, so no adaexplore search took a large step off the root in its first 12 steps."""
    t = Tree.new()
    a = grow(t, 0, "large", 0.5)
    assert [choose_step(t, a, step_rng(0, k)) for k in range(4, 14)] == ["small"] * 10  # the campaign's draws
    one = [choose_step(t, a, step_rng(0, k, "task_a")) for k in range(200)]
    two = [choose_step(t, a, step_rng(0, k, "task_b")) for k in range(200)]
    assert one != two and one == [choose_step(t, a, step_rng(0, k, "task_a")) for k in range(200)]
    assert 0.1 < one.count("large") / 200 < 0.3


# -- best ---------------------------------------------------------------------------------------

def test_best_is_the_fastest_correct_node_earliest_on_ties_whatever_uct_says():
    t = Tree.new()
    assert best_node(t) is None and t.best is None
    grow(t, 0, "large", 0.0, verdict="compile_error")
    assert best_node(t) is None
    first = grow(t, 0, "large", 0.5, speedup=None)
    grow(t, 0, "large", 0.5, speedup=None)  # a CPU tie: the earlier one stays best
    assert best_node(t) == first == t.best
    fast = grow(t, 1, "small", 0.05, verdict="passed", speedup=3.0)
    grow(t, 1, "small", 0.05, verdict="mismatch", speedup=None)
    assert best_node(t) == fast == t.best
