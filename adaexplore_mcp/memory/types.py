"""What the memory returns: plain pydantic models (the server turns them into tool results)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

RuleOrigin = Literal["seed", "user"]
RuleStatus = Literal["active", "retired"]


class RuleProvenance(BaseModel):
    origin: RuleOrigin
    seed_key: str | None = None
    signatures: list[str] = Field(default_factory=list, description="error signatures (clusters) the rule covers")
    cluster_ids: list[str] = Field(default_factory=list)
    created_at: float
    updated_at: float
    versions_seen: list[str] = Field(default_factory=list, description="Triton versions/backends the error was seen on")
    changes: int = Field(default=0, description="entries in the rule's history")


class RuleInfo(BaseModel):
    rule_id: str
    text: str
    status: RuleStatus
    count: int = Field(description="failures recorded under the rule's signatures")
    shown: bool = Field(description="active and above the count threshold (seed rules always): injected in briefs")
    relevance: int = Field(default=0, description="token overlap with the query text / task")
    provenance: RuleProvenance


class SkillQuery(BaseModel):
    rules: list[RuleInfo]
    total: int = Field(description="rules matching before the limit")


class ClusterExample(BaseModel):
    task_id: str
    error_line: str
    source_line: str


class FailureCluster(BaseModel):
    cluster_id: str
    signature: str
    count: int
    tasks: list[str]
    examples: list[ClusterExample]
    ripe: bool = Field(description="3+ failures from 2+ tasks and no active rule yet")
    rule_ids: list[str] = Field(default_factory=list, description="active rules covering this cluster")


class ClusterList(BaseModel):
    clusters: list[FailureCluster]


class HistoryEntry(BaseModel):
    action: str
    text: str
    reason: str
    actor: str
    at: float


class MemoryReport(BaseModel):
    """For the Adapt loop: what failed, what is ruled, what the seed memory misses."""

    failures: int
    failures_by_category: dict[str, int]
    clusters: int
    ripe_clusters: int
    rules_active: int
    rules_retired: int
    rules_shown: int
    rules_by_origin: dict[str, int]
    top_clusters: list[FailureCluster]
    uncovered_by_seed: list[FailureCluster] = Field(description="clusters no seed rule covers, largest first")
    seed_rules_never_hit: list[str] = Field(description="seed keys whose signatures no recorded failure matched")
