"""Submit-and-poll jobs: progress and results land in the database; failures are honest."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pydantic import BaseModel

from adaexplore_mcp.errors import NotFound
from adaexplore_mcp.jobs import JobRunner
from adaexplore_mcp.store import Store


class Answer(BaseModel):
    value: int


def _wait(runner: JobRunner, job_id: str, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = runner.get(job_id)
        if job.status in ("done", "failed", "lost"):
            return job
        time.sleep(0.02)
    raise AssertionError("job did not finish")


def test_a_finished_job_returns_its_result(tmp_path: Path) -> None:
    runner = JobRunner(Store(tmp_path / "db.sqlite3"))

    def work(progress):
        progress(0.5, "half")
        return Answer(value=42)

    job = _wait(runner, runner.submit("test", work).job_id)
    assert job.status == "done" and job.result == {"value": 42} and job.progress == 1.0


def test_a_caller_mistake_in_a_job_is_reported_as_failed_with_its_message(tmp_path: Path) -> None:
    runner = JobRunner(Store(tmp_path / "db.sqlite3"))

    def work(progress):
        raise ValueError("unknown task_id 'nope'")

    job = _wait(runner, runner.submit("test", work).job_id)
    assert job.status == "failed" and "unknown task_id" in job.error


def test_a_job_of_a_dead_process_is_lost_not_running_forever(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite3")
    with store.write() as tx:
        tx.execute("INSERT INTO jobs (job_id, kind, status, owner_pid, created_at, updated_at)"
                   " VALUES ('job_x', 'evaluate', 'running', 999999999, 0, 0)")
    assert JobRunner(store).get("job_x").status == "lost"


def test_a_job_whose_owners_pid_names_another_process_now_is_lost(tmp_path: Path) -> None:
    """Red team, round five: a server that is pid 1 of its container every time kept a dead server's job
    `running` forever (a pid alone was alive again). The owner is now its pid, start time, host and boot."""
    from adaexplore_mcp.search import owner

    store = Store(tmp_path / "db.sqlite3")
    me = owner.current()
    with store.write() as tx:
        for job, start in (("job_reused", (me.start or 0) + 1), ("job_mine", me.start)):
            tx.execute("INSERT INTO jobs (job_id, kind, status, owner_pid, owner_start, owner_host, owner_boot,"
                       " created_at, updated_at) VALUES (?, 'evaluate', 'running', ?, ?, ?, ?, 0, 0)",
                       (job, me.pid, start, me.host, me.boot))
    runner = JobRunner(store)
    assert runner.get("job_reused").status == "lost"  # the same pid, started at another time: another process
    assert runner.get("job_mine").status == "running"


def test_a_job_whose_first_write_fails_is_failed_not_queued(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = JobRunner(Store(tmp_path / "db.sqlite3"))
    update = runner._update

    def first_fails(job_id: str, **fields):
        if fields.get("message") == "started":
            raise OSError("disk full")
        return update(job_id, **fields)

    monkeypatch.setattr(runner, "_update", first_fails)
    job = _wait(runner, runner.submit("test", lambda progress: Answer(value=1)).job_id)
    assert job.status == "failed" and "disk full" in job.error


def test_an_unknown_job_id_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="unknown job_id"):
        JobRunner(Store(tmp_path / "db.sqlite3")).get("job_nope")
