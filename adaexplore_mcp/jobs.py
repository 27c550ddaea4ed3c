"""Submit-and-poll for calls that could outlast a client's 60-second request timeout.

A job runs in a background thread of the server process that accepted it; its status, progress and
result are rows in the shared database, so any server process on the data directory can answer
`get_job`. A job whose owning process died is reported `lost` rather than left `running` forever; what it
held dies with it (a search step it was expanding is free again: its claim belongs to the dead process).
A job's error says what went wrong like a tool error does: a caller's mistake in its own words, a bug
with its type and where it happened.
"""

from __future__ import annotations

import contextvars
import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

from adaexplore_mcp.errors import NotFound, error_message, quote
from adaexplore_mcp.search import owner
from adaexplore_mcp.store import Store, new_id

JobStatus = Literal["queued", "running", "done", "failed", "lost"]
# Progress is written at most this often, so a chatty evaluation does not hammer the database.
PROGRESS_WRITE_INTERVAL_S = 0.5


class Job(BaseModel):
    job_id: str
    kind: str
    status: JobStatus
    progress: float = Field(description="0..1")
    message: str = ""
    result: dict[str, Any] | None = Field(default=None, description="the finished call's result")
    error: str | None = None
    created_at: float
    updated_at: float


def _owner_alive(row: Any) -> bool:
    """Whether the server process that took the job still runs: its pid, start time, host and boot, as a search
    claim's owner (search/owner.py); a pid alone was alive again in the next container (pid 1 every time), and
    a dead server's job read `running` forever. Unknown (another host or container)
    counts as alive, as before."""
    pid, start, host, boot = (row[k] for k in ("owner_pid", "owner_start", "owner_host", "owner_boot"))
    if host is None:  # a job from before the owner columns: its pid alone, in this namespace
        host = owner.current().host
    return owner.is_alive(pid, start, host, boot) is not False


class JobRunner:
    def __init__(self, store: Store) -> None:
        self.store = store

    def submit(self, kind: str, work: Callable[[Callable[[float, str], None]], BaseModel]) -> Job:
        """Start `work(progress)` in a daemon thread; return the queued job at once."""
        job_id, me = new_id("job"), owner.current()
        now = time.time()
        with self.store.write() as tx:
            tx.execute(
                "INSERT INTO jobs (job_id, kind, status, progress, owner_pid, owner_start, owner_host, owner_boot,"
                " created_at, updated_at) VALUES (?, ?, 'queued', 0, ?, ?, ?, ?, ?, ?)",
                (job_id, kind, me.pid, me.start, me.host, me.boot, now, now),
            )
        context = contextvars.copy_context()  # the calling client goes with the job (fair sharing of the judge)
        threading.Thread(target=context.run, args=(self._run, job_id, work), name=f"job-{job_id}",
                         daemon=True).start()
        return self.get(job_id)

    def _run(self, job_id: str, work: Callable[[Callable[[float, str], None]], BaseModel]) -> None:
        last_write = 0.0

        def progress(fraction: float, message: str) -> None:
            nonlocal last_write
            if time.monotonic() - last_write < PROGRESS_WRITE_INTERVAL_S:
                return
            last_write = time.monotonic()
            self._update(job_id, status="running", progress=max(0.0, min(1.0, fraction)), message=message)

        try:  # the first write too: a failing store must leave the job 'failed' with its reason, not 'queued'
            self._update(job_id, status="running", message="started")
            result = work(progress)
            payload = result.model_dump_json()
        except Exception as exc:  # a caller's mistake, or a bug: reported like a tool error, never stuck 'running'
            self._finish(job_id, status="failed", error=error_message(exc))
        else:
            self._finish(job_id, status="done", progress=1.0, message="done", result=payload)

    def _finish(self, job_id: str, **fields: Any) -> None:
        """The final write; if even that fails (say the result cannot be stored), record why instead."""
        try:
            self._update(job_id, **fields)
        except Exception as exc:
            self._update(job_id, status="failed", error=f"the job finished but its outcome could not be stored: "
                                                        f"{error_message(exc)}")

    def _update(self, job_id: str, **fields: Any) -> None:
        fields["updated_at"] = time.time()
        assignments = ", ".join(f"{k} = ?" for k in fields)
        with self.store.write() as tx:
            tx.execute(f"UPDATE jobs SET {assignments} WHERE job_id = ?", (*fields.values(), job_id))

    def get(self, job_id: str) -> Job:
        row = self.store.read_one("SELECT * FROM jobs WHERE job_id = ?", (job_id,))
        if row is None:
            raise NotFound(f"unknown job_id {quote(job_id)}; job ids come from submit_* tools")
        status = row["status"]
        if status in ("queued", "running") and not _owner_alive(row):
            status = "lost"
        return Job(
            job_id=row["job_id"],
            kind=row["kind"],
            status=status,
            progress=row["progress"],
            message=row["message"],
            result=json.loads(row["result"]) if row["result"] else None,
            error=row["error"] if status != "lost" else (
                "the server process running this job stopped; submit again (a search step it was expanding is "
                "free again: call next_step for it)"),
            created_at=row["created_at"],
            updated_at=row["updated_at"],
        )
