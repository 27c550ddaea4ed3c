"""The store: migrations applied once, WAL shared across processes, writes atomic."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
import time
from pathlib import Path

import pytest

from adaexplore_mcp.store import Store


def _insert_jobs(path: str, prefix: str, n: int) -> None:
    store = Store(Path(path))
    for i in range(n):
        with store.write() as tx:
            tx.execute(
                "INSERT INTO jobs (job_id, kind, status, created_at, updated_at) VALUES (?, 'x', 'done', ?, ?)",
                (f"{prefix}-{i}", time.time(), time.time()),
            )


def test_a_new_database_gets_every_migration_and_wal_mode(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite3")
    assert store.schema_version() >= 1
    assert store.read_one("PRAGMA journal_mode")[0] == "wal"
    again = Store(tmp_path / "db.sqlite3")  # re-opening applies nothing twice
    assert again.schema_version() == store.schema_version()


def test_a_failed_write_transaction_leaves_nothing_behind(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite3")
    with pytest.raises(RuntimeError):
        with store.write() as tx:
            tx.execute("INSERT INTO jobs (job_id, kind, status, created_at, updated_at) VALUES ('a','x','done',0,0)")
            raise RuntimeError("boom")
    assert store.read("SELECT * FROM jobs") == []


def test_two_processes_writing_at_once_lose_no_row(tmp_path: Path) -> None:
    path = str(tmp_path / "db.sqlite3")
    Store(Path(path))
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_insert_jobs, args=(path, f"p{k}", 150)) for k in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 450
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_module_files_written_by_many_threads_at_once_are_complete(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from adaexplore_mcp.tasks.format import write_module_file

    source = "x = 1\n" * 10_000
    with ThreadPoolExecutor(8) as pool:
        paths = list(pool.map(lambda _: write_module_file(tmp_path, "cand", source)[1], range(32)))
    assert len(set(paths)) == 1 and paths[0].read_text() == source
    assert [p.name for p in tmp_path.iterdir()] == [paths[0].name]  # no temporary file left behind


# -- explicit migrations ----------------------------------------------------------------------------

def test_the_app_hands_every_part_s_migrations_to_the_store_once_each(tmp_path: Path) -> None:
    from adaexplore_mcp.app import MIGRATIONS

    from adaexplore_mcp.store import CORE_MIGRATIONS

    versions, core = [m.version for m in MIGRATIONS], {m.version for m in CORE_MIGRATIONS}
    assert len(versions) == len(set(versions)) and not core & set(versions)  # the store's own are its own
    store = Store(tmp_path / "db.sqlite3", MIGRATIONS)
    assert store.applied_versions() == {*core, *versions}
    store.migrate(MIGRATIONS)  # a part handing its own again changes nothing
    assert Store(tmp_path / "db.sqlite3", MIGRATIONS).applied_versions() == {*core, *versions}


def test_a_version_given_twice_fails_loudly_and_applies_nothing(tmp_path: Path) -> None:
    from adaexplore_mcp.store import CORE_MIGRATIONS, Migration, MigrationConflict

    a = Migration(7, "CREATE TABLE a (x INTEGER)", "part-a")
    b = Migration(7, "CREATE TABLE b (x INTEGER)", "part-b")
    with pytest.raises(MigrationConflict, match="migration 7 is given twice \\(part-a and part-b\\)"):
        Store(tmp_path / "db.sqlite3", [a, b])
    store = Store(tmp_path / "db.sqlite3", [a])
    with pytest.raises(MigrationConflict, match="migration 7 of part-b differs"):
        store.migrate([b])
    assert store.read_one("SELECT 1 FROM sqlite_master WHERE name = 'b'") is None
    assert store.applied_versions() - {m.version for m in CORE_MIGRATIONS} == {7}


def test_a_snapshot_reads_one_state_and_refuses_a_write_inside_it(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite3")
    other = Store(tmp_path / "db.sqlite3")
    insert = "INSERT INTO jobs (job_id, kind, status, created_at, updated_at) VALUES (?, 'x', 'done', 0, 0)"
    with store.snapshot() as conn:
        assert conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 0
        with other.write() as tx:  # another connection (another process) writes meanwhile
            tx.execute(insert, ("j1",))
        assert store.read_one("SELECT COUNT(*) AS n FROM jobs")["n"] == 0  # still the snapshot's state
        with pytest.raises(RuntimeError, match="cannot start inside another transaction"):
            with store.write():
                pass
    assert store.read_one("SELECT COUNT(*) AS n FROM jobs")["n"] == 1
