"""One meaning of "the best kernel", shared by the search (its tree, its views) and the exports.

The rule, over the nodes of one search in the order they were made:

1. only a passed kernel ranks at all (every other verdict is never "best");
2. a timed pass beats an untimed one: a measured speedup is evidence, "not timed" is none;
3. among timed passes, the higher speedup wins;
4. ties (two untimed passes, or equal speedups) go to the earlier node: a later kernel must do strictly
   better to take over.

Why untimed does not count as 1: under the CPU interpreter nothing is timed, so every pass ties and the
first stays best; on a GPU every pass is timed, and a pass that somehow lacks timing must not outrank a
measured kernel. Rewards are another matter: `search.tree.reward` scores an untimed pass as speedup 1 so
that the tree search still learns from it; that is exploration, not ranking.

Curves of "best so far" follow the same rule: their value after a step is the speedup of the best node
made so far (the search shows 1.0 while that node is untimed; the reports leave such points out).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol, TypeVar

PASSED = "passed"


class Ranked(Protocol):
    """Anything with a verdict and a speedup (a tree node, a node view, a snapshot node)."""

    @property
    def verdict(self) -> str | None: ...

    @property
    def speedup(self) -> float | None: ...


N = TypeVar("N", bound=Ranked)


def rank_key(node: Ranked) -> tuple[int, int, float]:
    """(passed, timed, speedup): a node ranks above another exactly when its key is greater."""
    passed = node.verdict == PASSED
    timed = passed and node.speedup is not None
    return int(passed), int(timed), float(node.speedup) if timed else 0.0  # type: ignore[arg-type]


def beats(a: Ranked, b: Ranked | None) -> bool:
    """Whether `a`, made after `b`, takes over as best (b None: a takes over when it passed)."""
    if a.verdict != PASSED:
        return False
    return b is None or rank_key(a) > rank_key(b)


def running_best(nodes: Iterable[N]) -> Iterator[N | None]:
    """After each node (in creation order), the best node so far; None until one passed."""
    best: N | None = None
    for node in nodes:
        if beats(node, best):
            best = node
        yield best


def best_of(nodes: Iterable[N]) -> N | None:
    """The best of `nodes` (in creation order); None when none passed."""
    best: N | None = None
    for best in running_best(nodes):
        pass
    return best
