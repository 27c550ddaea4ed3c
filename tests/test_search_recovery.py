"""Claims belong to a live process: a step claimed by a server that stopped mid-evaluation is free at once.

A claim records its owner (pid, process start time, host); another process frees it as soon as the owner is
gone (no such pid, a zombie, a reused pid, a reboot), at next_step, expand_node and get_search. The claim
timeout stays as the backstop for owners that cannot be checked (another host, a claim without an owner).
A submit_expand job whose server stopped is `lost`, and its step can be expanded again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from adaexplore_mcp.app import App
from adaexplore_mcp.config import Settings
from adaexplore_mcp.errors import UserError
from adaexplore_mcp.jobs import JobRunner
from adaexplore_mcp.models import TaskInfo
from adaexplore_mcp.search import SearchService
from adaexplore_mcp.search import owner as O
from adaexplore_mcp.search import repository as R
from adaexplore_mcp.search.fake_judge import FakeEvaluator, FakeJudge
from adaexplore_mcp.server import build_server
from adaexplore_mcp.store import Store

KERNEL = "import triton\nclass ModelNew:\n    pass\n# fake: verdict=passed speedup=1.5\n"
HOUR = 3600.0


def lookup(task_id: str) -> TaskInfo:
    return TaskInfo(task_id=task_id, name=f"task-{task_id}")


def service(path: Path, **kw: Any) -> SearchService:
    store = Store(path)
    return SearchService(store, FakeEvaluator(store, tasks=lookup), **kw)


def live_child() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def identity_of(proc: subprocess.Popen) -> O.ProcessIdentity:
    """The identity a server process running as `proc` would have recorded with its claim."""
    deadline = time.monotonic() + 10
    start = O.start_time(proc.pid)
    while start is None and sys.platform.startswith("linux") and time.monotonic() < deadline:
        time.sleep(0.01)
        start = O.start_time(proc.pid)
    return replace(O.current(), pid=proc.pid, start=start)


def dead_owner() -> O.ProcessIdentity:
    """The identity of a server process that was killed (and reaped): its pid names nothing now."""
    proc = live_child()
    identity = identity_of(proc)
    proc.kill()
    proc.wait()
    return identity


def claim_as(svc: SearchService, step_id: str, owner: O.ProcessIdentity, token: str = "dead-claim") -> None:
    with svc.store.write() as tx:
        assert R.claim_step(tx, step_id, token, owner)


def status_of(svc: SearchService, step_id: str) -> str:
    with svc.store.snapshot() as conn:
        return R.load_step(conn, step_id).status


@pytest.fixture
def svc(tmp_path: Path) -> SearchService:
    return service(tmp_path / "db.sqlite3")


# -- the owner's identity -----------------------------------------------------------------------

def test_a_process_identity_names_this_process_and_tells_the_living_from_the_dead() -> None:
    me = O.current()
    assert me.pid == os.getpid()
    if sys.platform.startswith("linux"):
        assert me.start is not None and me.start == O.start_time(os.getpid())
    assert O.is_alive(me.pid, me.start, me.host, me.boot) is True
    gone = dead_owner()
    assert O.is_alive(gone.pid, gone.start, gone.host, gone.boot) is False
    assert O.is_alive(None, None, None, None) is None  # nothing recorded: cannot tell
    assert O.is_alive(me.pid, me.start, "another-host|pid:[1]", me.boot) is None  # not ours to check


# -- a dead owner's claim is free at once -------------------------------------------------------

def test_next_step_frees_the_claim_of_a_dead_process_at_once(svc: SearchService) -> None:
    sid = svc.start_search("t1", 3)
    step = svc.next_step(sid).step_id
    claim_as(svc, step, dead_owner())
    assert svc.claim_timeout_s >= 1800  # not the timeout: the owner is gone
    again = svc.next_step(sid)
    assert again.step_id == step and status_of(svc, step) == "pending"
    result = svc.expand_node(sid, step, kernel_source=KERNEL)
    assert result.node_id == 1 and result.steps_used == 1


def test_expand_node_takes_over_the_claim_of_a_dead_process(svc: SearchService) -> None:
    sid = svc.start_search("t1", 3)
    step = svc.next_step(sid).step_id
    claim_as(svc, step, dead_owner())
    result = svc.expand_node(sid, step, kernel_source=KERNEL)  # no next_step in between
    assert result.node_id == 1 and status_of(svc, step) == "done"
    assert svc.store.read_one("SELECT COUNT(*) AS n FROM step_claims")["n"] == 0  # the claim row is gone too


def test_get_search_frees_the_claim_of_a_dead_process(svc: SearchService) -> None:
    sid = svc.start_search("t1", 3)
    step = svc.next_step(sid).step_id
    claim_as(svc, step, dead_owner())
    tree = svc.get_search(sid)
    assert tree.pending_step_id == step and status_of(svc, step) == "pending"


def test_the_claim_of_a_live_process_holds_until_that_process_dies(svc: SearchService) -> None:
    sid = svc.start_search("t1", 3)
    step = svc.next_step(sid).step_id
    proc = live_child()
    try:
        claim_as(svc, step, identity_of(proc))
        with pytest.raises(UserError, match="is being evaluated"):
            svc.next_step(sid)
        with pytest.raises(UserError, match="is being evaluated"):
            svc.expand_node(sid, step, kernel_source=KERNEL)
        svc.get_search(sid)
        assert status_of(svc, step) == "claimed"
    finally:
        proc.kill()
        proc.wait()
    assert svc.next_step(sid).step_id == step
    assert svc.expand_node(sid, step, kernel_source=KERNEL).node_id == 1


def test_a_claim_of_this_very_process_holds(svc: SearchService) -> None:
    sid = svc.start_search("t1", 3)
    step = svc.next_step(sid).step_id
    claim_as(svc, step, O.current())  # another thread of this server is evaluating it
    with pytest.raises(UserError, match="is being evaluated"):
        svc.next_step(sid)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process start times come from /proc")
def test_a_reused_pid_is_not_the_owner(svc: SearchService) -> None:
    sid = svc.start_search("t1", 3)
    step = svc.next_step(sid).step_id
    proc = live_child()
    try:
        real = identity_of(proc)
        claim_as(svc, step, replace(real, start=real.start - 1))  # same pid, started at another time
        assert svc.next_step(sid).step_id == step and status_of(svc, step) == "pending"
        claim_as(svc, step, replace(O.current(), start=O.current().start - 1), token="mine-reused")
        assert svc.next_step(sid).step_id == step and status_of(svc, step) == "pending"
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process states come from /proc")
def test_a_zombie_owner_is_dead(svc: SearchService) -> None:
    sid = svc.start_search("t1", 3)
    step = svc.next_step(sid).step_id
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.2)"])
    try:
        claim_as(svc, step, identity_of(proc))
        deadline = time.monotonic() + 20
        while (O._stat_fields(proc.pid) or ["?"])[0] != "Z" and time.monotonic() < deadline:
            time.sleep(0.02)  # exited, not reaped: still a pid, but nobody is evaluating
        assert svc.next_step(sid).step_id == step and status_of(svc, step) == "pending"
    finally:
        proc.wait()


def test_a_claim_from_before_the_last_boot_is_free(svc: SearchService) -> None:
    sid = svc.start_search("t1", 3)
    step = svc.next_step(sid).step_id
    if not O.current().boot:
        pytest.skip("no boot id on this platform")
    claim_as(svc, step, replace(O.current(), boot="00000000-0000-0000-0000-000000000000"))
    assert svc.next_step(sid).step_id == step and status_of(svc, step) == "pending"


# -- the timeout is the backstop ----------------------------------------------------------------

def test_an_owner_on_another_host_is_trusted_until_the_claim_times_out(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    patient = service(path)
    sid = patient.start_search("t1", 3)
    step = patient.next_step(sid).step_id
    claim_as(patient, step, replace(dead_owner(), host="another-host|pid:[4026531836]"))
    with pytest.raises(UserError, match="is being evaluated"):
        patient.next_step(sid)  # its pid means nothing here: wait for the timeout
    assert service(path, claim_timeout_s=0.0).next_step(sid).step_id == step
    assert status_of(patient, step) == "pending"


def test_a_claim_without_an_owner_times_out(tmp_path: Path) -> None:
    """A claim made by a server from before the owner was recorded has no owner row."""
    path = tmp_path / "db.sqlite3"
    patient = service(path)
    sid = patient.start_search("t1", 3)
    step = patient.next_step(sid).step_id
    with patient.store.write() as tx:
        tx.execute("UPDATE steps SET status = 'claimed', claim_token = 'old', claimed_at = ? WHERE step_id = ?",
                   (time.time() - 60, step))
    with pytest.raises(UserError, match="is being evaluated"):
        patient.next_step(sid)
    assert service(path, claim_timeout_s=30.0).next_step(sid).step_id == step


def test_the_claims_table_is_a_registered_migration(tmp_path: Path) -> None:
    store = Store(tmp_path / "db.sqlite3", R.MIGRATIONS)
    versions = {r["version"] for r in store.read("SELECT version FROM schema_version")}
    assert {R.MIGRATION_VERSION, R.CLAIMS_MIGRATION_VERSION} <= versions
    columns = {r["name"] for r in store.read("PRAGMA table_info(step_claims)")}
    assert {"step_id", "claim_token", "owner_pid", "owner_start", "owner_host", "claimed_at"} <= columns


# -- submit_expand after a server stop ------------------------------------------------------------

def _dead_expand_job(store: Store, pid: int) -> str:
    with store.write() as tx:
        tx.execute("INSERT INTO jobs (job_id, kind, status, progress, message, owner_pid, created_at, updated_at)"
                   " VALUES ('job_dead', 'expand', 'running', 0.3, 'evaluating', ?, ?, ?)",
                   (pid, time.time(), time.time()))
    return "job_dead"


def _wait(runner: JobRunner, job_id: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = runner.get(job_id)
        if job.status in ("done", "failed", "lost"):
            return job
        time.sleep(0.02)
    raise AssertionError("job did not finish")


def test_a_step_being_expanded_by_a_lost_job_can_be_expanded_again(svc: SearchService) -> None:
    sid = svc.start_search("t1", 3)
    step = svc.next_step(sid).step_id
    owner = dead_owner()  # the server that ran the job: killed mid-evaluation
    claim_as(svc, step, owner)
    runner = JobRunner(svc.store)
    lost = runner.get(_dead_expand_job(svc.store, owner.pid))
    assert lost.status == "lost" and "free again" in lost.error
    job = runner.submit("expand", lambda progress: svc.expand_node(sid, step, kernel_source=KERNEL,
                                                                    progress=progress))
    done = _wait(runner, job.job_id)
    assert done.status == "done", done.error
    assert done.result["node_id"] == 1 and done.result["step_id"] == step


def test_submit_expand_after_a_server_stop_through_the_tools(tmp_path: Path) -> None:
    app = App(Settings(home=tmp_path / "home", device="cpu"), judge=FakeJudge())

    async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
        result = await client.call_tool(tool, args)
        assert not result.is_error, result.content[0].text
        return result.structured_content

    async def scenario() -> None:
        async with Client(build_server(app=app), read_timeout_seconds=60) as client:
            sid = (await call(client, "start_search", task_id="scaled_softmax", budget=2))["search_id"]
            step = (await call(client, "next_step", search_id=sid))["step_id"]
            # a previous server accepted submit_expand for this step and was killed while evaluating it
            owner = dead_owner()
            with app.store.write() as tx:
                assert R.claim_step(tx, step, "killed-server", owner)
            job_id = _dead_expand_job(app.store, owner.pid)
            lost = await call(client, "get_job", job_id=job_id)
            assert lost["status"] == "lost" and "submit again" in lost["error"]
            assert (await call(client, "next_step", search_id=sid))["step_id"] == step  # not "being evaluated"
            job = await call(client, "submit_expand", search_id=sid, step_id=step, kernel_source=KERNEL)
            deadline = time.monotonic() + 60
            while job["status"] in ("queued", "running") and time.monotonic() < deadline:
                await anyio.sleep(0.05)
                job = await call(client, "get_job", job_id=job["job_id"])
            assert job["status"] == "done", job["error"]
            assert job["result"]["node_id"] == 1 and job["result"]["steps_left"] == 1

    try:
        anyio.run(scenario)
    finally:
        app.close()
