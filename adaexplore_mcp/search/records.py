"""The search's stored things as small typed records: what the repository returns instead of raw rows.

Frozen dataclasses with the columns as attributes, so the service reads `step.kind`, not `step["kind"]`,
and a typo is an AttributeError at the line that makes it.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any, TypeVar

from adaexplore_mcp.search.tree import NodeKind
from adaexplore_mcp.search.types import SearchParams

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class SearchRecord:
    """One row of `searches` (with its open steps' ids, when listed)."""

    search_id: str
    task_id: str
    strategy: str
    budget: int
    seed: int
    params: str  # SearchParams as JSON
    steps_used: int
    version: int
    best_node_id: int | None
    best_speedup: float | None
    created_at: float
    updated_at: float
    open_steps: str | None = None  # when listed: the ids of the steps out, oldest first, comma-separated

    @property
    def steps_left(self) -> int:
        return self.budget - self.steps_used

    @property
    def open_step_ids(self) -> list[str]:
        return self.open_steps.split(",") if self.open_steps else []

    @property
    def search_params(self) -> SearchParams:
        return SearchParams.model_validate_json(self.params)


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One step handed out, with the owner of its claim (None columns: not claimed, or claimed before
    migration 4) and the end of its lease (None: handed out before migration 7, no lease)."""

    step_id: str
    search_id: str
    counter: int
    parent_id: int
    kind: str
    pool: str  # node ids as JSON
    status: str
    claim_token: str | None
    claimed_at: float | None
    node_id: int | None
    created_at: float
    owner_pid: int | None = None
    owner_start: int | None = None
    owner_host: str | None = None
    owner_boot: str | None = None
    lease_until: float | None = None

    @property
    def pool_ids(self) -> list[int]:
        return [int(i) for i in json.loads(self.pool)]


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """One node as shown to a caller; the payload fields are None unless they were asked for."""

    node_id: int
    parent_id: int | None
    kind: NodeKind
    depth: int
    verdict: str | None
    speedup: float | None
    reward: float | None
    visits: int
    total_reward: float
    max_reward: float
    note: str
    created_at: float
    kernel_source: str | None = None
    evaluation: str | None = None  # the stored Evaluation as JSON
    eval_id: str | None = None
    speedup_tf32: float | None = None  # the other yardsticks (speedups.of_columns), when the read asked for them
    speedup_compile: float | None = None
    pct_roofline: float | None = None
    bound: str | None = None

    def __getitem__(self, key: str) -> Any:
        """Read by column name, for code written against rows (search/brief.py)."""
        return getattr(self, key)


def as_record(cls: type[R], row: sqlite3.Row) -> R:
    """The record of a row: its columns by name (columns the record lacks are left out)."""
    names = _field_names(cls)
    return cls(**{k: row[k] for k in row.keys() if k in names})


@lru_cache(maxsize=None)
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))  # cached: this runs for every row a search reads
