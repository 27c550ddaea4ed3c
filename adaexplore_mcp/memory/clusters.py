"""Clusters: failures grouped by signature. A cluster is *ripe* for a rule when it has
RIPE_MIN_FAILURES records from RIPE_MIN_TASKS distinct tasks and no active rule covers it."""

from __future__ import annotations

import hashlib

from ..store import Store
from .records import RULE_CATEGORIES
from .types import ClusterExample, FailureCluster

RIPE_MIN_FAILURES = 3
RIPE_MIN_TASKS = 2
MAX_EXAMPLES = 3
MAX_TASKS_LISTED = 20

_IN_RULE_CATEGORIES = "category IN (" + ",".join("?" * len(RULE_CATEGORIES)) + ")"


def cluster_id(signature: str) -> str:
    """Stable across processes and databases: derived from the signature alone."""
    return "c_" + hashlib.sha1(signature.encode()).hexdigest()[:10]


def signature_of(store: Store, cid: str) -> str | None:
    """The signature of a cluster id, if any rule-category failure has it."""
    for row in store.read(f"SELECT DISTINCT signature FROM failures WHERE {_IN_RULE_CATEGORIES}", RULE_CATEGORIES):
        if cluster_id(row["signature"]) == cid:
            return row["signature"]
    return None


def active_rules_by_signature(store: Store) -> dict[str, list[str]]:
    rows = store.read(
        "SELECT rs.signature, rs.rule_id FROM rule_signatures rs JOIN rules r ON r.rule_id = rs.rule_id"
        " WHERE r.status = 'active' ORDER BY rs.rule_id"
    )
    out: dict[str, list[str]] = {}
    for row in rows:
        out.setdefault(row["signature"], []).append(row["rule_id"])
    return out


def _examples(store: Store, signature: str) -> list[ClusterExample]:
    rows = store.read(
        "SELECT task_id, error_line, source_line FROM failures WHERE signature = ?"
        " ORDER BY failure_id DESC LIMIT 50", (signature,)
    )
    picked, seen_tasks, seen_lines = [], set(), set()
    for prefer_new_task in (True, False):  # first one example per task, then fill up
        for row in rows:
            key = (row["task_id"], row["error_line"], row["source_line"])
            if len(picked) >= MAX_EXAMPLES or key in seen_lines:
                continue
            if prefer_new_task and row["task_id"] in seen_tasks:
                continue
            picked.append(ClusterExample(task_id=row["task_id"], error_line=row["error_line"],
                                         source_line=row["source_line"]))
            seen_tasks.add(row["task_id"])
            seen_lines.add(key)
    return picked


def list_clusters(store: Store, ripe_only: bool = True, limit: int = 50) -> list[FailureCluster]:
    """Largest first. Only rule categories (errors, timeouts, crashes) form clusters."""
    rows = store.read(
        "SELECT signature, COUNT(*) AS n, COUNT(DISTINCT task_id) AS t FROM failures"
        f" WHERE {_IN_RULE_CATEGORIES} GROUP BY signature ORDER BY n DESC, signature",
        RULE_CATEGORIES,
    )
    ruled = active_rules_by_signature(store)
    out: list[FailureCluster] = []
    for row in rows:
        sig, n, t = row["signature"], int(row["n"]), int(row["t"])
        rule_ids = ruled.get(sig, [])
        ripe = n >= RIPE_MIN_FAILURES and t >= RIPE_MIN_TASKS and not rule_ids
        if ripe_only and not ripe:
            continue
        tasks = [r["task_id"] for r in store.read(
            "SELECT task_id, COUNT(*) AS k FROM failures WHERE signature = ? GROUP BY task_id"
            " ORDER BY k DESC, task_id LIMIT ?", (sig, MAX_TASKS_LISTED))]
        out.append(FailureCluster(cluster_id=cluster_id(sig), signature=sig, count=n, tasks=tasks,
                                  examples=_examples(store, sig), ripe=ripe, rule_ids=rule_ids))
        if len(out) >= limit:
            break
    return out
