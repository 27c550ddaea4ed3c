"""Several workers (issue 6's scheduling, checked on the CPU): evaluations spread across free workers, a
crash in one leaves the others' evaluations alone, and the per-GPU lock serializes timing across processes.

The same pool serves one worker per GPU (or several per GPU with `workers_per_gpu`); here the workers are
CPU-interpreter ones, which exercise exactly the leasing, replacement and isolation code.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from adaexplore_mcp.config import Settings
from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Verdict
from tests.test_judge_cases import GOOD, candidate, cpu_settings, task


def pid_recording(pid_dir: Path, sleep_s: float) -> str:
    """A correct candidate that notes which worker ran it (its runner's parent is that worker's zygote) and
    takes a while. It writes to a host directory, so these scheduling tests run without the sandbox."""
    body = (f"        import os, time\n        time.sleep({sleep_s})\n"
            f"        open(os.path.join({str(pid_dir)!r}, str(os.getppid())), 'a').close()\n"
            "        return affine(x)")
    return candidate(body)


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory: pytest.TempPathFactory):
    base = cpu_settings(tmp_path_factory.mktemp("sched"))
    judge = Judge(Settings(home=base.home, device="cpu", workers=2, limits=base.limits, sandbox="off"))
    judge.start(wait=True)
    yield judge
    judge.close()


# slow: a judge of two workers of its own (20 s to start on two busy cores); scheduling: test_judge_fair.py, and this
# module's GPU-lock and slot tests
@pytest.mark.slow
def test_concurrent_evaluations_are_spread_over_the_free_workers(two_workers: Judge, tmp_path: Path) -> None:
    source = pid_recording(tmp_path, 0.3)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: two_workers.evaluate(task(), source), range(4)))
    assert all(r.verdict == Verdict.passed for r in results), [(r.verdict, r.error, r.rejected) for r in results]
    served = sorted(p.name for p in tmp_path.iterdir())
    assert len(served) == 2, served  # both workers' zygotes forked a runner


# slow: on the same two-worker judge; a crash contained to its evaluation: test_judge_isolation.py
@pytest.mark.slow
def test_a_crash_in_one_worker_does_not_disturb_an_evaluation_running_in_another(two_workers: Judge,
                                                                                   tmp_path: Path) -> None:
    slow = pid_recording(tmp_path, 1.5)
    crash = candidate("        import os\n        os._exit(3)")
    with ThreadPoolExecutor(2) as pool:
        running = pool.submit(two_workers.evaluate, task(), slow)
        time.sleep(0.3)  # the slow one holds a worker when the other crashes
        crashed = pool.submit(two_workers.evaluate, task(), crash)
        assert crashed.result().verdict == Verdict.crashed
        assert running.result().verdict == Verdict.passed
    after = [two_workers.evaluate(task(), pid_recording(tmp_path, 0.0)) for _ in range(2)]
    assert all(r.verdict == Verdict.passed for r in after)


def _hold_gpu_lock(home: str, started: mp.synchronize.Event, seconds: float) -> None:
    from adaexplore_mcp.judge.timing import gpu_lock

    with gpu_lock(Path(home), 0):
        started.set()
        time.sleep(seconds)


def test_the_gpu_lock_keeps_a_second_server_process_from_timing_on_the_same_gpu(tmp_path: Path) -> None:
    from adaexplore_mcp.judge.timing import gpu_lock

    ctx = mp.get_context("spawn")
    started = ctx.Event()
    other = ctx.Process(target=_hold_gpu_lock, args=(str(tmp_path), started, 1.0))
    other.start()
    assert started.wait(60)
    t0 = time.monotonic()
    with gpu_lock(tmp_path, 0):
        waited = time.monotonic() - t0
    other.join(10)
    assert waited > 0.5  # it waited for the other process to finish timing
    with gpu_lock(tmp_path, 1):  # another GPU is not blocked
        pass


def test_several_workers_per_gpu_get_distinct_slots_on_the_same_device() -> None:
    from adaexplore_mcp.judge import api

    settings = Settings(home=Path("/tmp/unused"), device="cuda", workers_per_gpu=2)
    original = api._visible_gpus
    api._visible_gpus = lambda: ["0", "1"]
    try:
        judge = Judge(settings)
    finally:
        api._visible_gpus = original
    configs = sorted(judge._pool._configs.values(), key=lambda c: c.slot)
    assert [(c.slot, c.physical_index, c.cuda_visible) for c in configs] == [
        (0, 0, "0"), (1, 0, "0"), (2, 1, "1"), (3, 1, "1")]
    judge.close()




# slow: two 12 s timeouts; fair sharing between clients: test_judge_fair.py
@pytest.mark.slow
def test_a_client_whose_evaluations_hang_cannot_hold_another_clients_behind_them(two_workers: Judge) -> None:
    """Two workers, client A sends two endless candidates, client B one normal candidate: B is judged at
    once (A holds at most all but one worker), while A's second evaluation waits for A's first."""
    import contextvars

    from adaexplore_mcp.clients import CURRENT_CLIENT

    hang = candidate("        while True:\n            pass")

    def as_client(name: str, source: str, timeout_s: float) -> Verdict:
        def call() -> Verdict:
            CURRENT_CLIENT.set(name)
            return two_workers.evaluate(task(), source, timeout_s=timeout_s).verdict
        return contextvars.copy_context().run(call)

    with ThreadPoolExecutor(3) as pool:
        hung = [pool.submit(as_client, "A", hang, 12.0) for _ in range(2)]
        time.sleep(0.5)
        t0 = time.monotonic()
        polite = pool.submit(as_client, "B", GOOD, 60.0).result()
        waited = time.monotonic() - t0
        assert polite == Verdict.passed
        assert waited < 10.0, f"client B waited {waited:.1f}s behind client A's hanging evaluations"
        assert [h.result() for h in hung] == [Verdict.timeout, Verdict.timeout]
