"""A search tree as plain data, and the few facts every report draws from it.

The export package never reads the search's own types: the caller maps its tree into a
`TreeSnapshot` (a list of nodes with parent ids), so reports can be made from a stored
search, a JSON file, or a test fixture alike.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, Field, model_validator

from adaexplore_mcp.models import Speedups
from adaexplore_mcp.ranking import PASSED, best_of, running_best


def _as_str(value: object) -> object:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


NodeId = Annotated[str, BeforeValidator(_as_str)]


class SnapshotNode(BaseModel):
    node_id: NodeId
    parent_id: NodeId | None = Field(default=None, description="None for the root")
    kind: Literal["root", "large", "small"]
    verdict: str | None = Field(default=None, description="the judge's verdict; None for the root")
    speedup: float | None = Field(default=None, description="None when failed or not timed (CPU interpreter)")
    speedups: Speedups | None = Field(default=None, description="eager, TF32, torch.compile, % of roofline")
    reward: float = 0.0
    visits: int = 0
    step_index: int = Field(default=0, description="order of creation; the root is 0")
    note: str = ""

    @property
    def correct(self) -> bool:
        return self.verdict == PASSED


class TreeSnapshot(BaseModel):
    search_id: str
    task_name: str
    strategy: str = "adaexplore"
    budget: int = 0
    nodes: list[SnapshotNode]
    best_node_id: NodeId | None = None
    gpu: str | None = Field(default=None, description="device name, shown in reports when given")

    @model_validator(mode="after")
    def _check_tree(self) -> TreeSnapshot:
        ids = [n.node_id for n in self.nodes]
        if len(set(ids)) != len(ids):
            raise ValueError("node ids must be unique")
        known = set(ids)
        roots = [n for n in self.nodes if n.parent_id is None]
        if len(roots) != 1:
            raise ValueError(f"a tree has exactly one root (parent_id None), got {len(roots)}")
        for n in self.nodes:
            if n.parent_id is not None and n.parent_id not in known:
                raise ValueError(f"node {n.node_id} has unknown parent {n.parent_id}")
        if self.best_node_id is not None and self.best_node_id not in known:
            raise ValueError(f"best_node_id {self.best_node_id} is not a node")
        return self

    # ------------------------------------------------------------------ derived facts
    @property
    def root(self) -> SnapshotNode:
        return next(n for n in self.nodes if n.parent_id is None)

    def steps(self) -> list[SnapshotNode]:
        """The non-root nodes in the order they were made."""
        return sorted((n for n in self.nodes if n.parent_id is not None), key=lambda n: n.step_index)

    def children(self) -> dict[str, list[SnapshotNode]]:
        out: dict[str, list[SnapshotNode]] = {n.node_id: [] for n in self.nodes}
        for n in sorted(self.nodes, key=lambda n: n.step_index):
            if n.parent_id is not None:
                out[n.parent_id].append(n)
        return out

    def best(self) -> SnapshotNode | None:
        """The given best node, else the best step by the search's own rule (adaexplore_mcp.ranking)."""
        if self.best_node_id is not None:
            return next(n for n in self.nodes if n.node_id == self.best_node_id)
        return best_of(self.steps())

    def best_curve(self) -> list[tuple[int, float | None]]:
        """(step, speedup of the best node made at or before it); None while that node is untimed or absent
        (a timed pass always outranks an untimed one, so this is the running best of the timed passes)."""
        return [(n.step_index, best.speedup if best is not None else None)
                for n, best in zip(self.steps(), running_best(self.steps()))]

    def verdict_counts(self) -> dict[str, int]:
        return dict(Counter(n.verdict or "none" for n in self.steps()).most_common())

    def kind_counts(self) -> dict[str, int]:
        return dict(Counter(n.kind for n in self.steps()).most_common())

    def timed(self) -> bool:
        return any(n.speedup is not None for n in self.steps())


# Colours by verdict, shared by the HTML and PNG reports.
VERDICT_COLORS = {
    "passed": "#2e9d4a",
    "mismatch": "#8e44ad",
    "compile_error": "#c0392b",
    "runtime_error": "#e67e22",
    "timeout": "#a0522d",
    "crashed": "#555555",
    "rejected": "#d4a017",
    None: "#1f3b73",  # the root
}
OTHER_COLOR = "#999999"


def verdict_color(verdict: str | None) -> str:
    return VERDICT_COLORS.get(verdict, OTHER_COLOR)


@dataclass(frozen=True)
class Placed:
    node: SnapshotNode
    x: float  # in leaf slots, 0-based
    depth: int


def tree_layout(snapshot: TreeSnapshot) -> list[Placed]:
    """A tidy top-down layout: leaves take consecutive slots in depth-first order, parents centre above."""
    kids = snapshot.children()
    placed: list[Placed] = []
    next_slot = 0.0

    def visit(node: SnapshotNode, depth: int) -> float:
        nonlocal next_slot
        children = kids[node.node_id]
        if not children:
            x = next_slot
            next_slot += 1
        else:
            xs = [visit(c, depth + 1) for c in children]
            x = (xs[0] + xs[-1]) / 2
        placed.append(Placed(node, x, depth))
        return x

    # Recursion depth is the tree depth, at most the budget: far below Python's limit for real budgets.
    visit(snapshot.root, 0)
    return sorted(placed, key=lambda p: p.node.step_index)


def speedup_text(speedup: float | None) -> str:
    return "-" if speedup is None else f"{speedup:.2f}x"
