"""Judge workers as Ray actors (issue 14), checked on the CPU: a local Ray cluster started here, two
CPU-interpreter actors, evaluations spread across both, an actor killed mid-evaluation (`crashed`, with
the cause) and one killed while idle (the request goes to a fresh actor, the candidate is not blamed),
and clear errors for an unreachable cluster or a missing ray. The pool's code is the same for GPU actors.

Candidates run without the sandbox here (as in test_judge_scheduling.py) so they can note, in a host
directory, which zygote forked them: a runner's parent is its zygote, the zygote's parent the actor.
"""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from adaexplore_mcp.config import Settings
from adaexplore_mcp.judge import Judge
from adaexplore_mcp.judge.processes.pool import WorkerStartError
from adaexplore_mcp.models import Verdict
from tests.test_judge_cases import GOOD, candidate, cpu_settings, task
from tests.test_judge_scheduling import pid_recording

ray = pytest.importorskip("ray")

# RAY_SLOW: the tests on a local Ray cluster (and the one that starts a fresh interpreter) take 90 s on two busy
# cores, most of it starting the cluster; they run under -m slow. Ray is a deployment option (--workers ray),
# not part of what the judge protects; the pool's code is the same as the local pool's the default run tests.


def _parent_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    raise AssertionError(f"no PPid for {pid}")


def _wait_dead(actor: object, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get(actor.ready.remote(), timeout=5)  # type: ignore[attr-defined]
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.2)
    raise AssertionError("the killed actor still answers")


@pytest.fixture(scope="module")
def ray_judge(tmp_path_factory: pytest.TempPathFactory):
    base = cpu_settings(tmp_path_factory.mktemp("ray"))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=80 * 1024 * 1024)
    judge = Judge(Settings(home=base.home, device="cpu", workers=2, cache_dir=base.cache_dir, limits=base.limits,
                           sandbox="off", ray_address="local"))
    try:
        judge.start(wait=True)
        yield judge
    finally:
        judge.close()
        ray.shutdown()


@pytest.mark.slow  # a local Ray cluster (45 s to start on two busy cores) or a fresh interpreter: see RAY_SLOW
def test_concurrent_evaluations_are_spread_over_both_actors(ray_judge: Judge, tmp_path: Path) -> None:
    source = pid_recording(tmp_path, 0.3)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: ray_judge.evaluate(task(), source), range(4)))
    assert all(r.verdict == Verdict.passed for r in results), [(r.verdict, r.error) for r in results]
    zygotes = sorted(int(p.name) for p in tmp_path.iterdir())
    assert len(zygotes) == 2, zygotes  # both actors' zygotes forked runners
    actor_pids = {w.info["pid"] for w in ray_judge._pool._workers.values()}
    assert {_parent_of(z) for z in zygotes} == actor_pids  # the referees are the actors themselves
    assert all(r.node and "/" in r.node for r in results), [r.node for r in results]
    assert all(r.backend == "cpu-interpreter" and r.device_index is None for r in results)


@pytest.mark.slow  # a local Ray cluster (45 s to start on two busy cores) or a fresh interpreter: see RAY_SLOW
def test_progress_is_forwarded_from_the_actor(ray_judge: Judge) -> None:
    seen: list[tuple[float, str]] = []
    ev = ray_judge.evaluate(task(), GOOD,
                            progress=lambda f, m: seen.append((f, m)))
    assert ev.verdict == Verdict.passed
    messages = [m for _, m in seen]
    assert "compiling: importing the candidate" in messages and any(m.startswith("checking trial") for m in messages)
    assert [f for f, _ in seen] == sorted(f for f, _ in seen), seen  # in order


@pytest.mark.slow  # a local Ray cluster (45 s to start on two busy cores) or a fresh interpreter: see RAY_SLOW
def test_require_gpu_on_a_cluster_without_gpus_is_a_clear_error(ray_judge: Judge, tmp_path: Path) -> None:
    with pytest.raises(WorkerStartError, match="ADAEXPLORE_REQUIRE_GPU='H100'.*no GPU actors"):
        Judge(Settings(home=tmp_path, device="auto", ray_address="local", require_gpu="H100"))


@pytest.mark.slow  # a local Ray cluster (45 s to start on two busy cores) or a fresh interpreter: see RAY_SLOW
def test_an_actor_killed_mid_evaluation_gives_crashed_with_the_cause_and_is_replaced(ray_judge: Judge,
                                                                                     tmp_path: Path) -> None:
    started = tmp_path / "started"
    started.mkdir()
    slow = candidate("        import os, time\n"
                     f"        open(os.path.join({str(started)!r}, str(os.getppid())), 'a').close()\n"
                     "        time.sleep(30)\n        return affine(x)")
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(ray_judge.evaluate, task(), slow)
        deadline = time.monotonic() + 60
        while not any(started.iterdir()):
            assert time.monotonic() < deadline and not running.done(), "the slow candidate never started"
            time.sleep(0.1)
        actor_pid = _parent_of(int(next(started.iterdir()).name))
        victim = next(w for w in ray_judge._pool._workers.values() if w.info["pid"] == actor_pid)
        ray.kill(victim.actor, no_restart=True)
        ev = running.result(timeout=60)
    assert ev.verdict == Verdict.crashed
    assert "died mid-evaluation" in (ev.error.excerpt or ""), ev.error
    after = [ray_judge.evaluate(task(), pid_recording(tmp_path, 0.0)) for _ in range(2)]
    assert all(r.verdict == Verdict.passed for r in after), [(r.verdict, r.error) for r in after]
    assert victim.wait_ready()["pid"] != actor_pid  # a new actor serves that slot


@pytest.mark.slow  # a local Ray cluster (45 s to start on two busy cores) or a fresh interpreter: see RAY_SLOW
def test_a_request_for_an_actor_that_died_idle_goes_to_a_fresh_one(ray_judge: Judge, tmp_path: Path) -> None:
    workers = list(ray_judge._pool._workers.values())
    old = {w.info["pid"] for w in workers}
    for w in workers:  # the pool does not know: the next lease finds a dead actor
        ray.kill(w.actor, no_restart=True)
    for w in workers:
        _wait_dead(w.actor)
    ev = ray_judge.evaluate(task(), pid_recording(tmp_path, 0.0))
    assert ev.verdict == Verdict.passed, (ev.verdict, ev.error)
    zygote = int(next(tmp_path.iterdir()).name)
    assert _parent_of(zygote) not in old


def test_an_unreachable_cluster_is_a_clear_error_naming_its_address(tmp_path: Path) -> None:
    with pytest.raises(WorkerStartError, match=r"cannot reach the Ray cluster at '127\.0\.0\.1:9'"):
        Judge(Settings(home=tmp_path, device="cpu", ray_address="127.0.0.1:9"))


@pytest.mark.slow  # a local Ray cluster (45 s to start on two busy cores) or a fresh interpreter: see RAY_SLOW
def test_the_local_pool_never_imports_ray_and_the_ray_pool_without_ray_says_how_to_get_it(tmp_path: Path) -> None:
    code = ("import sys\n"
            "from pathlib import Path\n"
            "from adaexplore_mcp.config import Settings\n"
            "from adaexplore_mcp.judge import Judge\n"
            "from adaexplore_mcp.judge.processes.pool import WorkerStartError\n"
            f"Judge(Settings(home=Path({str(tmp_path)!r}), device='cpu')).close()\n"
            "assert 'ray' not in sys.modules, 'the local pool imported ray'\n"
            "sys.modules['ray'] = None  # as if ray were not installed\n"
            "try:\n"
            f"    Judge(Settings(home=Path({str(tmp_path)!r}), device='cpu', ray_address='auto'))\n"
            "except WorkerStartError as exc:\n"
            "    assert \"pip install 'adaexplore-mcp[ray]'\" in str(exc), exc\n"
            "else:\n"
            "    raise AssertionError('no error without ray')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
