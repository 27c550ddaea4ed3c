"""The search tree and the AdaExplore rules on it: reward, UCT selection, step choice, backpropagation.

Pure functions over an in-memory `Tree`; no I/O. The constants below are SEARCH.md's defaults; every
one of them is a per-search parameter (`SearchParams` in types.py) and the functions take them explicitly.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Literal

from adaexplore_mcp.ranking import beats, best_of

# Reward of one evaluation (SEARCH.md, "linear in speedup, capped").
REWARD_COMPILE_ERROR = 0.0
REWARD_FAILURE = 0.05  # compiles, then crashes / times out / mismatches / is rejected
REWARD_BASE = 0.4
REWARD_SCALE = 1.2
SPEEDUP_MIN = 0.1
SPEEDUP_MAX = 10.0
# Selection (UCT with an explicit "open a new child" arm).
ALPHA = 0.0  # weight of the max reward M in Q; 0 means Q is the mean reward
C_UCB = 0.3
C_EXPAND = 0.3
# Step choice.
P_LARGE = 0.2
MAX_SMALL_CHILDREN = 2
# Proposer context.
MEMORY_SIZE = 5
POOL_SIZE = 5
MAX_RULES = 5  # validity rules a brief shows (search/brief.py picks them for the step)

StepKind = Literal["large", "small"]
NodeKind = Literal["root", "large", "small"]
ROOT = 0


@dataclass(slots=True)
class TreeNode:
    """One node's structure and statistics (sources stay in the database)."""

    node_id: int
    parent_id: int | None
    kind: NodeKind
    depth: int
    verdict: str | None = None
    speedup: float | None = None  # as measured; None without GPU timing
    reward: float = 0.0
    visits: int = 0  # N
    total_reward: float = 0.0  # W
    max_reward: float = 0.0  # M
    anchor: int = ROOT  # nearest large-step (or root) node at or above this one
    children: list[int] = field(default_factory=list)

    @property
    def correct(self) -> bool:
        return self.verdict == "passed"


@dataclass
class Tree:
    """All nodes of one search, indexed by node id (ids are the creation order: root 0, then 1, 2...)."""

    nodes: list[TreeNode]
    # For every anchor (root or large-step node): its best correct node within its small-step subtree.
    anchor_best: dict[int, int] = field(default_factory=dict)
    best: int | None = None  # the best node so far (adaexplore_mcp.ranking)
    version: int = 0  # the searches.version this tree reflects (the service's cache key)
    # Small steps handed out but not yet expanded, by parent: they count as small children (see `with_pending`).
    pending_small: dict[int, int] = field(default_factory=dict)

    @classmethod
    def new(cls) -> "Tree":
        return cls(nodes=[TreeNode(node_id=ROOT, parent_id=None, kind="root", depth=0)])

    @property
    def root(self) -> TreeNode:
        return self.nodes[ROOT]

    def __len__(self) -> int:
        return len(self.nodes)

    def add(self, node: TreeNode) -> None:
        """Attach a node whose id is the next one (statistics are set by `backpropagate`)."""
        if node.node_id != len(self.nodes):
            raise ValueError(f"node ids must be dense: expected {len(self.nodes)}, got {node.node_id}")
        parent = self.nodes[node.parent_id]  # type: ignore[index]
        node.anchor = node.node_id if node.kind != "small" else parent.anchor
        parent.children.append(node.node_id)
        self.nodes.append(node)
        if node.correct:
            best = self.anchor_best.get(node.anchor)
            if beats(node, None if best is None else self.nodes[best]):
                self.anchor_best[node.anchor] = node.node_id
            if beats(node, None if self.best is None else self.nodes[self.best]):
                self.best = node.node_id

    def path_to_root(self, node_id: int) -> list[int]:
        """node_id, its parent, ..., the root."""
        out = []
        nodes = self.nodes
        current: int | None = node_id
        while current is not None:
            out.append(current)
            current = nodes[current].parent_id
        return out


def reward(
    verdict: str,
    speedup: float | None,
    *,
    compile_error: float = REWARD_COMPILE_ERROR,
    failure: float = REWARD_FAILURE,
    base: float = REWARD_BASE,
    scale: float = REWARD_SCALE,
    s_min: float = SPEEDUP_MIN,
    s_max: float = SPEEDUP_MAX,
) -> float:
    """r = 0 (compile error); 0.05 (other failures); 0.4 + 1.2 * (clip(s, 0.1, 10) - 0.1) / 9.9 (correct).

    A correct kernel without a measured speedup (no GPU timing) is scored with s = 1.
    Range: [0, 1.6] with the defaults.
    """
    if verdict == "compile_error":
        return compile_error
    if verdict != "passed":
        return failure
    s = 1.0 if speedup is None else min(max(speedup, s_min), s_max)
    return base + scale * (s - s_min) / (s_max - s_min)


def q_value(node: TreeNode, alpha: float = ALPHA) -> float:
    """Q(v) = alpha * M(v) + (1 - alpha) * W(v) / N(v)."""
    if node.visits == 0:
        return 0.0
    return alpha * node.max_reward + (1 - alpha) * node.total_reward / node.visits


def ucb(node: TreeNode, parent_visits: int, c: float = C_UCB, alpha: float = ALPHA) -> float:
    """UCB(v) = Q(v) + c * sqrt(ln N(parent) / N(v)); infinite when N(v) = 0."""
    if node.visits == 0:
        return math.inf
    return q_value(node, alpha) + c * math.sqrt(math.log(max(parent_visits, 1)) / node.visits)


def expand_score(tree: Tree, p: TreeNode, c_e: float = C_EXPAND, alpha: float = ALPHA) -> float:
    """E(p) = max over children v of Q(v) + c_e * sqrt(ln N(p) / K^2), K = #children; infinite when K = 0."""
    k = len(p.children)
    if k == 0:
        return math.inf
    best_q = max(q_value(tree.nodes[v], alpha) for v in p.children)
    return best_q + c_e * math.sqrt(math.log(max(p.visits, 1)) / (k * k))


def select(tree: Tree, c: float = C_UCB, c_e: float = C_EXPAND, alpha: float = ALPHA) -> int:
    """Walk down from the root: at p, stop if E(p) > max UCB over p's children, else go to the argmax child.

    A leaf is always grown (E is infinite). Ties between children go to the earliest child.
    """
    p = tree.root
    while True:
        if not p.children:
            return p.node_id
        best_child, best_ucb = None, -math.inf
        for v in p.children:
            u = ucb(tree.nodes[v], p.visits, c, alpha)
            if u > best_ucb:
                best_child, best_ucb = v, u
        if expand_score(tree, p, c_e, alpha) > best_ucb:
            return p.node_id
        p = tree.nodes[best_child]  # type: ignore[index]


def choose_step(
    tree: Tree, p: int, rng: random.Random, p_large: float = P_LARGE, max_small_children: int = MAX_SMALL_CHILDREN
) -> StepKind:
    """Root: large. Else large if p already has `max_small_children` (2) small children, or with prob 0.2.

    The random draw is taken on every non-root call (even when the rule already forces a large step),
    so the sequence of draws depends only on the seed and the step counter.
    """
    node = tree.nodes[p]
    if node.kind == "root":
        return "large"
    draw = rng.random()
    small_children = sum(1 for v in node.children if tree.nodes[v].kind == "small") + tree.pending_small.get(p, 0)
    if small_children >= max_small_children or draw < p_large:
        return "large"
    return "small"


def with_pending(tree: Tree, pending: Iterable[tuple[int, str]]) -> Tree:
    """The tree as selection sees it while steps are out (virtual loss): each pending step, given as (the node
    it grows, its kind), counts as one visit with reward 0 of that node and of every ancestor, and a pending
    small step counts as a small child of its node. So steps handed out together spread over the tree instead
    of all growing the node UCT likes best, and a node gets no more than `max_small_children` small children.
    A copy: `tree` (the service's cache) is left as it is. With nothing pending, `tree` itself."""
    pending = list(pending)
    if not pending:
        return tree
    nodes = list(tree.nodes)
    visits: dict[int, int] = {}
    small: dict[int, int] = {}
    for node_id, kind in pending:
        for i in tree.path_to_root(node_id):
            visits[i] = visits.get(i, 0) + 1
        if kind == "small":
            small[node_id] = small.get(node_id, 0) + 1
    for i, extra in visits.items():
        nodes[i] = replace(nodes[i], visits=nodes[i].visits + extra)  # W unchanged: a loss until expanded
    return Tree(nodes=nodes, anchor_best=tree.anchor_best, best=tree.best, version=tree.version, pending_small=small)


def backpropagate(tree: Tree, node_id: int, r: float, path: list[int] | None = None) -> list[int]:
    """The node and every ancestor: N += 1, W += r, M = max(M, r). Returns the ids touched.

    `path` (node_id up to the root) may be passed when the caller already computed it.
    """
    touched = tree.path_to_root(node_id) if path is None else path
    nodes = tree.nodes
    for i in touched:
        n = nodes[i]
        n.visits += 1
        n.total_reward += r
        if r > n.max_reward:
            n.max_reward = r
    return touched


def best_node(tree: Tree) -> int | None:
    """The best node of the whole tree by the one ranking rule (adaexplore_mcp.ranking); None if none passed.

    Recomputed from scratch: `Tree.best` keeps the same answer up to date as nodes are added."""
    best = best_of(tree.nodes)
    return best.node_id if best is not None else None
