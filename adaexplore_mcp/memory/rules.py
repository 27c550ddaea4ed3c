"""Validity rules: text, the signatures (clusters) they cover, status, and every change (rule_history).

A rule's count is live: the failures recorded under its signatures. A user rule is *shown* (injected
in briefs) from SHOW_MIN_COUNT failures on; seed rules are shown while active.
"""

from __future__ import annotations

import json
import sqlite3
import time

from ..store import Store, dumps, new_id
from .records import RULE_CATEGORIES
from .types import HistoryEntry, RuleInfo, RuleProvenance

RULE_MAX_CHARS = 300
RULE_PREFIXES = ("You cannot ", "Always ", "Never ")
SHOW_MIN_COUNT = 3


def validate_text(text: str) -> str:
    """One sentence, 'You cannot ...' / 'Always ...' / 'Never ...', at most RULE_MAX_CHARS."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("rule text is empty: write one sentence starting with 'You cannot' or 'Always'")
    text = " ".join(text.split())
    if len(text) > RULE_MAX_CHARS:
        raise ValueError(f"rule text is {len(text)} characters; keep it to one sentence of at most {RULE_MAX_CHARS}")
    if not text.startswith(RULE_PREFIXES):
        raise ValueError("rule text must start with 'You cannot', 'Always' or 'Never' (one imperative sentence), "
                         f"got {text[:40]!r}")
    return text


def _history(tx: sqlite3.Connection, rule_id: str, action: str, text: str, reason: str, actor: str) -> None:
    tx.execute("INSERT INTO rule_history (rule_id, action, text, reason, actor, at) VALUES (?,?,?,?,?,?)",
               (rule_id, action, text, reason, actor, time.time()))


def insert_rule(tx: sqlite3.Connection, *, text: str, signatures: list[str], origin: str, actor: str, reason: str,
                seed_key: str | None = None, meta: dict | None = None, rule_id: str | None = None) -> str | None:
    """Insert inside an open write transaction; None when a seed rule with that key already exists."""
    now = time.time()
    rule_id = rule_id or new_id("rule")
    cur = tx.execute(
        "INSERT OR IGNORE INTO rules (rule_id, signature, text, status, origin, seed_key, meta, created_at, updated_at)"
        " VALUES (?,?,?,?,?,?,?,?,?)",
        (rule_id, signatures[0] if signatures else None, text, "active", origin, seed_key, dumps(meta or {}), now, now),
    )
    if cur.rowcount == 0:
        return None
    for sig in signatures:
        tx.execute("INSERT OR IGNORE INTO rule_signatures (rule_id, signature, added_at) VALUES (?,?,?)",
                   (rule_id, sig, now))
    _history(tx, rule_id, "seed" if origin == "seed" else "add", text, reason, actor)
    return rule_id


def _require(tx: sqlite3.Connection, rule_id: str) -> sqlite3.Row:
    row = tx.execute("SELECT * FROM rules WHERE rule_id = ?", (rule_id,)).fetchone()
    if row is None:
        raise ValueError(f"unknown rule id {rule_id!r}; list rules with query_skills")
    return row


def _reason(reason: str) -> str:
    if not isinstance(reason, str) or not reason.strip():
        raise ValueError("give a reason for the change (it is kept in the rule's history)")
    return reason.strip()[:500]


def update_text(store: Store, rule_id: str, text: str, reason: str, actor: str) -> None:
    text, reason = validate_text(text), _reason(reason)
    with store.write() as tx:
        row = _require(tx, rule_id)
        if row["status"] != "active":
            raise ValueError(f"rule {rule_id!r} is retired; add a new rule instead")
        tx.execute("UPDATE rules SET text = ?, updated_at = ? WHERE rule_id = ?", (text, time.time(), rule_id))
        _history(tx, rule_id, "update", text, reason, actor)


def retire(store: Store, rule_id: str, reason: str, actor: str, tx: sqlite3.Connection | None = None) -> None:
    reason = _reason(reason)
    if tx is None:
        with store.write() as own:
            return retire(store, rule_id, reason, actor, own)
    row = _require(tx, rule_id)
    if row["status"] != "active":
        raise ValueError(f"rule {rule_id!r} is already retired")
    tx.execute("UPDATE rules SET status = 'retired', updated_at = ? WHERE rule_id = ?", (time.time(), rule_id))
    _history(tx, rule_id, "retire", row["text"], reason, actor)
    return None


def attach(tx: sqlite3.Connection, rule_id: str, signature: str, reason: str, actor: str) -> None:
    row = _require(tx, rule_id)
    if row["status"] != "active":
        raise ValueError(f"rule {rule_id!r} is retired; it cannot take a new cluster")
    tx.execute("INSERT OR IGNORE INTO rule_signatures (rule_id, signature, added_at) VALUES (?,?,?)",
               (rule_id, signature, time.time()))
    tx.execute("UPDATE rules SET updated_at = ? WHERE rule_id = ?", (time.time(), rule_id))
    _history(tx, rule_id, "attach", signature, reason, actor)


def history(store: Store, rule_id: str) -> list[HistoryEntry]:
    if store.read_one("SELECT 1 FROM rules WHERE rule_id = ?", (rule_id,)) is None:
        raise ValueError(f"unknown rule id {rule_id!r}")
    rows = store.read("SELECT action, text, reason, actor, at FROM rule_history WHERE rule_id = ?"
                      " ORDER BY history_id", (rule_id,))
    return [HistoryEntry(**dict(r)) for r in rows]


def load_all(store: Store, cluster_id_of) -> list[RuleInfo]:
    """Every rule with its live count, signatures and provenance (unsorted)."""
    cats = ",".join("?" * len(RULE_CATEGORIES))
    sigs: dict[str, list[str]] = {}
    for r in store.read("SELECT rule_id, signature FROM rule_signatures ORDER BY added_at, signature"):
        sigs.setdefault(r["rule_id"], []).append(r["signature"])
    counts = {r["rule_id"]: int(r["n"]) for r in store.read(
        "SELECT rs.rule_id, COUNT(f.failure_id) AS n FROM rule_signatures rs JOIN failures f"
        f" ON f.signature = rs.signature AND f.category IN ({cats}) GROUP BY rs.rule_id", RULE_CATEGORIES)}
    seen: dict[str, set[str]] = {}
    for r in store.read(
        "SELECT DISTINCT rs.rule_id, f.triton_version, f.backend FROM rule_signatures rs JOIN failures f"
        " ON f.signature = rs.signature"):
        if r["triton_version"]:
            seen.setdefault(r["rule_id"], set()).add(f"triton-{r['triton_version']}-{r['backend']}")
    changes = {r["rule_id"]: int(r["n"]) for r in store.read(
        "SELECT rule_id, COUNT(*) AS n FROM rule_history GROUP BY rule_id")}
    out = []
    for row in store.read("SELECT * FROM rules"):
        rid, meta = row["rule_id"], json.loads(row["meta"] or "{}")
        count = counts.get(rid, 0)
        active = row["status"] == "active"
        rule_sigs = sigs.get(rid, [])
        out.append(RuleInfo(
            rule_id=rid, text=row["text"], status=row["status"], count=count,
            shown=active and (row["origin"] == "seed" or count >= SHOW_MIN_COUNT),
            provenance=RuleProvenance(
                origin=row["origin"], seed_key=row["seed_key"], signatures=rule_sigs,
                cluster_ids=[cluster_id_of(s) for s in rule_sigs],
                created_at=row["created_at"], updated_at=row["updated_at"],
                versions_seen=sorted(set(meta.get("seen", [])) | seen.get(rid, set())),
                changes=changes.get(rid, 0),
            ),
        ))
    return out


def seed_order(store: Store) -> dict[str, int]:
    return {r["rule_id"]: int(json.loads(r["meta"] or "{}").get("order", 9999))
            for r in store.read("SELECT rule_id, meta FROM rules WHERE origin = 'seed'")}
