"""The skill memory (Adapt): failure records, signature clusters, validity rules, seed rules.

Takes a `Store` and plain data (`Evaluation`); never imports the server or the judge. Its schema change
(migration 3) is `MIGRATIONS`: the app hands it to the store with every other part's, and a
`MemoryService` opened on a store without it applies it itself.
"""

from __future__ import annotations

from ..store import Migration

# Defined before `.service` is imported below: the service reads it from this package.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(
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
        "memory",
    ),
)

from .service import MemoryService  # noqa: E402

__all__ = ["MIGRATIONS", "MemoryService"]
