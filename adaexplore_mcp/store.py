"""The one SQLite database shared by every server process on a data directory.

Why SQLite in WAL mode: several assistant windows run their own server process against the same
data directory; WAL lets them read while one writes, `BEGIN IMMEDIATE` serializes writers without
deadlocks, and the busy timeout makes a writer wait instead of failing. Every write is one short
transaction, so a process killed mid-write leaves the previous consistent state.

Schema changes are numbered migrations, applied in version order and recorded in `schema_version`.
The store's own tables (migration 1: tasks, evaluations, failures, rules, rule_history, jobs) are
always applied; every other migration is handed to the store explicitly by whoever opens it (the app
passes the whole list; a part opened on its own passes its own, see `Store.migrate`). Nothing is
registered as a side effect of an import, and a version given twice (once by two parts, or later
with other statements) is an error, never silently skipped. A migration may rely only on migration 1
and on its own part's earlier ones: a database may receive them in any order.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BUSY_TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class Migration:
    """One numbered schema change. Append only: never edit a migration that has shipped."""

    version: int
    sql: str
    owner: str  # the part whose tables it changes, named in errors


class MigrationConflict(RuntimeError):
    """Two different schema changes claim one version number: a wiring bug, refused before anything runs."""


CORE_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        """
        CREATE TABLE tasks (
            task_id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            origin TEXT NOT NULL,
            source TEXT NOT NULL,
            source_hash TEXT NOT NULL,
            small_shapes TEXT,
            description TEXT NOT NULL DEFAULT '',
            info TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE INDEX tasks_by_hash ON tasks(source_hash);

        CREATE TABLE evaluations (
            eval_id TEXT PRIMARY KEY,
            task_id TEXT NOT NULL,
            source_hash TEXT NOT NULL,
            kernel_source TEXT NOT NULL,
            verdict TEXT NOT NULL,
            speedup REAL,
            backend TEXT NOT NULL,
            result TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        CREATE INDEX evaluations_by_task ON evaluations(task_id, created_at);

        CREATE TABLE failures (
            failure_id INTEGER PRIMARY KEY AUTOINCREMENT,
            eval_id TEXT NOT NULL,
            task_id TEXT NOT NULL,
            category TEXT NOT NULL,
            signature TEXT NOT NULL,
            exception TEXT NOT NULL DEFAULT '',
            error_line TEXT NOT NULL DEFAULT '',
            source_line TEXT NOT NULL DEFAULT '',
            backend TEXT NOT NULL DEFAULT '',
            triton_version TEXT NOT NULL DEFAULT '',
            created_at REAL NOT NULL
        );
        CREATE INDEX failures_by_signature ON failures(signature);
        CREATE INDEX failures_by_task ON failures(task_id);

        CREATE TABLE rules (
            rule_id TEXT PRIMARY KEY,
            signature TEXT,
            text TEXT NOT NULL,
            status TEXT NOT NULL DEFAULT 'active',
            origin TEXT NOT NULL DEFAULT 'user',
            seed_key TEXT,
            meta TEXT NOT NULL DEFAULT '{}',
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE INDEX rules_by_signature ON rules(signature);
        CREATE UNIQUE INDEX rules_by_seed_key ON rules(seed_key) WHERE seed_key IS NOT NULL;

        CREATE TABLE rule_history (
            history_id INTEGER PRIMARY KEY AUTOINCREMENT,
            rule_id TEXT NOT NULL,
            action TEXT NOT NULL,
            text TEXT NOT NULL,
            reason TEXT NOT NULL DEFAULT '',
            actor TEXT NOT NULL DEFAULT '',
            at REAL NOT NULL
        );

        CREATE TABLE jobs (
            job_id TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            status TEXT NOT NULL,
            progress REAL NOT NULL DEFAULT 0,
            message TEXT NOT NULL DEFAULT '',
            result TEXT,
            error TEXT,
            owner_pid INTEGER,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        """,
        "store",
    ),
    # A job's owner as a search claim's (search/owner.py): a pid alone was alive again in the next container
    # (pid 1 every time) and a dead server's job read `running` forever.
    Migration(
        8,
        """
        ALTER TABLE jobs ADD COLUMN owner_start INTEGER;
        ALTER TABLE jobs ADD COLUMN owner_host TEXT;
        ALTER TABLE jobs ADD COLUMN owner_boot TEXT;
        """,
        "store",
    ),
)


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


class Store:
    """Lazy per-thread connections to one database file; `write()` is a `BEGIN IMMEDIATE` block and
    `snapshot()` a read transaction (several reads that see one state)."""

    def __init__(self, path: Path, migrations: Iterable[Migration] = ()) -> None:
        """Open (creating if needed) the database and apply migration 1 plus `migrations`."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._known: dict[int, Migration] = {}
        self._known_lock = threading.Lock()
        self.migrate((*CORE_MIGRATIONS, *migrations))

    def _connect(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            self._local.conn = conn
        return conn

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One short write transaction; rolled back whole on any exception."""
        conn = self._connect()
        if conn.in_transaction:
            raise RuntimeError("a write cannot start inside another transaction of this thread (a snapshot "
                               "or a write): finish that one first")
        self._begin_immediate(conn)
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        else:
            conn.execute("COMMIT")

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """Several reads that see one consistent state (a deferred read transaction; WAL lets writers go on).

        Re-entrant: inside a snapshot or a write of this thread, the same transaction is used.
        """
        conn = self._connect()
        if conn.in_transaction:
            yield conn
            return
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            if conn.in_transaction:  # (an error inside may already have ended it)
                conn.execute("COMMIT")

    @staticmethod
    def _begin_immediate(conn: sqlite3.Connection) -> None:
        # busy_timeout covers most contention; this loop covers the rare SQLITE_BUSY on upgrade.
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def read(self, sql: str, params: tuple | dict = ()) -> list[sqlite3.Row]:
        return self._connect().execute(sql, params).fetchall()

    def read_one(self, sql: str, params: tuple | dict = ()) -> sqlite3.Row | None:
        return self._connect().execute(sql, params).fetchone()

    def schema_version(self) -> int:
        row = self.read_one("SELECT MAX(version) AS v FROM schema_version")
        return int(row["v"] or 0) if row else 0

    def migrate(self, migrations: Iterable[Migration]) -> None:
        """Add `migrations` to the ones this store knows, then apply, in version order, every known one the
        database lacks (idempotent: a part opened on a store passes its own list here, a no-op when the app
        already did). A version given twice in one call, or again later with other statements, raises
        MigrationConflict before anything is applied."""
        self._learn(migrations)
        conn = self._connect()
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at REAL)")
        if set(self._known) <= self.applied_versions():
            return  # nothing to do: no write transaction (every part checks at startup)
        with self.write() as tx:
            done = {r[0] for r in tx.execute("SELECT version FROM schema_version")}
            for version in sorted(self._known):
                if version in done:
                    continue
                for statement in _split_sql(self._known[version].sql):
                    tx.execute(statement)
                tx.execute("INSERT INTO schema_version VALUES (?, ?)", (version, time.time()))

    def _learn(self, migrations: Iterable[Migration]) -> None:
        batch: dict[int, Migration] = {}
        for m in migrations:
            if m.version in batch:
                raise MigrationConflict(f"migration {m.version} is given twice ({batch[m.version].owner} and "
                                        f"{m.owner}): every schema change needs a version of its own")
            batch[m.version] = m
        with self._known_lock:
            for version, m in batch.items():
                known = self._known.get(version)
                if known is not None and known.sql != m.sql:
                    raise MigrationConflict(f"migration {version} of {m.owner} differs from the migration "
                                            f"{version} of {known.owner} this store already has")
            self._known.update(batch)

    def applied_versions(self) -> set[int]:
        return {int(r[0]) for r in self.read("SELECT version FROM schema_version")}

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


def _split_sql(script: str) -> list[str]:
    """Split a migration into statements (executescript would commit our transaction)."""
    return [s.strip() for s in script.split(";") if s.strip()]
