"""The skill memory (Adapt): failure records, signature clusters, validity rules, seed rules.

Takes a `Store` and plain data (`Evaluation`); never imports the server or the judge.
"""

from __future__ import annotations

from ..store import register_migration

MIGRATION = (
    3,
    """
    CREATE TABLE rule_signatures (
        rule_id TEXT NOT NULL,
        signature TEXT NOT NULL,
        added_at REAL NOT NULL,
        PRIMARY KEY (rule_id, signature)
    );
    CREATE INDEX rule_signatures_by_signature ON rule_signatures(signature);
    CREATE INDEX failures_by_category ON failures(category, signature)
    """,
)
register_migration(*MIGRATION)

from .service import MemoryService  # noqa: E402

__all__ = ["MemoryService"]
