"""A candidate that crashes, hangs, floods stdout or scribbles out of bounds costs one verdict, no more:
the next evaluation in the same Judge works normally."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import types
from collections.abc import Sequence

import pytest

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Verdict
from tests.test_judge_cases import GOOD, candidate, cpu_settings, task


@pytest.fixture(scope="module")
def judge(shared_judge: Judge) -> Judge:
    """The session's judge (tests/conftest.py): each test here ends with an honest candidate passing on it."""
    return shared_judge


def _next_one_passes(judge: Judge) -> None:
    ev = judge.evaluate(task(), GOOD)
    assert ev.verdict == Verdict.passed, ev


def test_os_exit_is_crashed_and_the_next_evaluation_passes(judge: Judge) -> None:
    ev = judge.evaluate(task(), candidate("        affine(x)\n        os._exit(7)", extra="\nimport os\n"))
    assert ev.verdict == Verdict.crashed
    assert "exited with code 7" in ev.error.message
    _next_one_passes(judge)


def test_a_segfault_is_crashed_with_the_candidate_line_and_the_next_evaluation_passes(judge: Judge) -> None:
    ev = judge.evaluate(task(), candidate("        affine(x)\n        ctypes.string_at(0)", extra="\nimport ctypes\n"))
    assert ev.verdict == Verdict.crashed
    assert "SIGSEGV" in ev.error.message
    assert ev.error.source_line == "ctypes.string_at(0)"
    _next_one_passes(judge)


def test_an_endless_loop_times_out_saying_where_it_was_stuck_and_the_next_evaluation_passes(judge: Judge) -> None:
    ev = judge.evaluate(task(), candidate("        while True:\n            x = x + 0\n        return affine(x)"),
                        timeout_s=4)
    assert ev.verdict == Verdict.timeout
    assert "4s" in ev.error.message
    assert ev.error.source_line in ("while True:", "x = x + 0")
    _next_one_passes(judge)


def test_flooding_stdout_cannot_reach_the_parents_stdout_and_the_next_evaluation_passes(judge: Judge) -> None:
    flood = candidate("        print('x' * (10 * 1024 * 1024))\n        os.write(1, b'y' * 1024)\n        return affine(x)",
                      extra="\nimport os\n")
    ev = judge.evaluate(task(), flood)
    assert ev.verdict == Verdict.passed
    _next_one_passes(judge)


def test_an_out_of_bounds_store_gives_a_sensible_verdict_and_the_next_evaluation_passes(judge: Judge) -> None:
    # Triton 3.9's interpreter does not bounds-check: a store far past the end writes into unmapped
    # memory and the process dies (SIGSEGV), or into the heap and glibc aborts later. Both are `crashed`.
    oob = candidate("        y = torch.empty_like(x)\n        oob_kernel[(1,)](x, y, 10_000_000_000, BLOCK=128)\n        return y",
                    extra='''
@triton.jit
def oob_kernel(x_ptr, y_ptr, shift, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs + shift, tl.load(x_ptr + offs))
''')
    ev = judge.evaluate(task(), oob)
    assert ev.verdict in (Verdict.crashed, Verdict.runtime_error), ev
    _next_one_passes(judge)


# slow: a server process of its own, 18 s; a candidate's output kept from the parent's:
# test_flooding_stdout_cannot_reach_the_parents_stdout_and_the_next_evaluation_passes
@pytest.mark.slow
def test_worker_stdout_never_reaches_the_server_stdout(tmp_path) -> None:
    """End to end: a server-like process whose stdout is the protocol stream sees none of the flood."""
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        sys.path.insert(0, {os.getcwd()!r})
        from adaexplore_mcp.judge import Judge
        from tests.test_judge_cases import candidate, cpu_settings, task
        if __name__ == "__main__":
            flood = candidate("        print('FLOOD' * 1000)\\n        return affine(x)")
            with Judge(cpu_settings(Path({str(tmp_path)!r}))) as judge:
                ev = judge.evaluate(task(), flood)
            sys.stdout.write("RESULT " + ev.verdict.value)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180,
                         cwd=os.getcwd())
    assert out.stdout == "RESULT passed", (out.stdout[:500], out.stderr[-2000:])


# slow: three evaluations and a new worker, 11 s on two busy cores: pool upkeep, not isolation
@pytest.mark.slow
def test_a_worker_is_recycled_after_its_quota_of_evaluations(judge: Judge, monkeypatch: pytest.MonkeyPatch) -> None:
    from adaexplore_mcp.judge.processes import pool

    monkeypatch.setattr(pool, "RECYCLE_AFTER", 2)
    pids = []
    for _ in range(3):
        _next_one_passes(judge)
        pids.append(judge._pool._workers[0].proc.pid)
    # three evaluations at two per worker: exactly one replacement, wherever the old quota stood
    assert len(set(pids)) == 2


def test_an_out_of_memory_claimed_on_the_cpu_is_a_readable_verdict_and_replaces_nothing(judge: Judge) -> None:
    """A runner's word that it ran out of memory is checked by the referee (Referee.memory_short): on the CPU a
    fresh referee frees nothing, so the worker and its cached references stay (red team, round 4: any error
    text saying "out of memory" recycled the worker, dropped every cached reference and ran the evaluation twice)."""
    before = judge._pool._workers[0].proc.pid
    oom = candidate('        affine(x)\n        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 '
                    'GiB. GPU 0 has a total capacity of 139.80 GiB of which 3.89 GiB is free.")')
    ev = judge.evaluate(task(), oom)
    assert ev.verdict == Verdict.runtime_error, ev
    assert "Tried to allocate 6.00 GiB" in ev.error.message and "3.89 GiB is free" in ev.error.message
    assert any("ran out of device memory" in w for w in ev.warnings), ev.warnings
    assert not any("fresh judge process" in w for w in ev.warnings), ev.warnings
    _next_one_passes(judge)
    assert judge._pool._workers[0].proc.pid == before


def _bare_referee(device: str, held: Sequence[int] = ()):
    """A Referee with no processes: its device, and cached references holding `held` bytes of device memory."""
    from adaexplore_mcp.judge.referee import Referee

    r = Referee.__new__(Referee)
    r.device = device
    r.refs = {i: types.SimpleNamespace(runner=types.SimpleNamespace(bytes=b)) for i, b in enumerate(held)}
    return r


def test_the_referee_believes_an_out_of_memory_only_when_the_device_is_short(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU: a retry on a fresh referee helps when the device is nearly full or other tasks' references
    hold memory; a claim with the device free is not believed."""
    import torch

    referee = _bare_referee
    free = {"bytes": 60 << 30}
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (free["bytes"], 80 << 30))
    assert not referee("cpu", [8 << 30]).memory_short(None)
    assert not referee("cuda", [256 << 20]).memory_short(None)  # 60 of 80 GiB free, little held elsewhere
    assert referee("cuda", [2 << 30]).memory_short(None)  # other references hold 2 GiB
    mine = referee("cuda", [2 << 30])
    assert not mine.memory_short(mine.refs[0])  # ...unless it is this task's own
    free["bytes"] = 1 << 30
    assert referee("cuda", []).memory_short(None)  # the device is nearly full


def test_a_reference_out_of_memory_at_create_task_names_the_bytes(judge: Judge) -> None:
    from tests.test_judge_cases import AFFINE_TASK

    before = judge._pool._workers[0].proc.pid
    source = AFFINE_TASK.replace("return x * 2 + 1", "raise torch.OutOfMemoryError('CUDA out of memory. Tried to "
                                 "allocate 6.00 GiB. GPU 0 has a total capacity of 139.80 GiB of which 2.28 GiB is free')")
    probe = judge.probe_task(task(source, name="oom_reference"))
    assert not probe.ok and "Tried to allocate 6.00 GiB" in probe.error and "2.28 GiB is free" in probe.error
    assert judge._pool._workers[0].proc.pid == before  # on the CPU a fresh referee would free nothing
    _next_one_passes(judge)


def test_a_candidate_that_monkeypatches_torch_cannot_touch_the_next_evaluation(judge: Judge) -> None:
    """Each candidate has a runner process of its own, killed after it: a patch dies with it."""
    patcher = candidate("        torch.randn = lambda *a, **k: torch.zeros(*a, **k)\n        return affine(x)")
    ev = judge.evaluate(task(), patcher)
    assert ev.verdict == Verdict.passed  # its own inputs come from the reference's process, not its torch.randn
    clean = judge.evaluate(task(), GOOD)
    assert clean.verdict == Verdict.passed and not clean.warnings


def test_evaluating_after_close_raises_a_clear_error(tmp_path) -> None:
    from adaexplore_mcp.judge import WorkerStartError

    j = Judge(cpu_settings(tmp_path))
    j.close()
    with pytest.raises(WorkerStartError, match="closed"):
        j.evaluate(task(), GOOD)


def test_a_killed_worker_takes_its_runners_logs_with_it(tmp_path: Path) -> None:
    """A worker killed mid-call never runs its runners' cleanup: their logs (a candidate may fill one to the size
    limit) went with it only when the pool deleted them (red team, round seven). Another worker's stay."""
    from adaexplore_mcp.judge.processes.pool import Worker, WorkerConfig

    logs = tmp_path / "logs"
    logs.mkdir()
    worker = Worker(WorkerConfig(slot=0, backend="cpu", home=str(tmp_path), log_dir=str(logs)))
    mine = logs / f"runner-cand-{worker.proc.pid}-1.log"
    other = logs / f"runner-cand-{worker.proc.pid + 1}-1.log"
    for path in (mine, other):
        path.write_bytes(b"x" * 1024)
    worker.kill()
    assert not mine.exists() and other.exists()


def test_a_reference_that_died_loading_on_a_gpu_is_worth_a_fresh_referee(monkeypatch: pytest.MonkeyPatch) -> None:
    """The campaign's H200 run: references died while loading (exit code 70, CUBLAS_STATUS_ALLOC_FAILED) beside
    9 busy workers, and each was charged to its candidate as a runtime_error. No candidate code runs in the
    reference's process: on a GPU such a death is retried once on a fresh referee; on the CPU it is the verdict."""
    import torch

    from adaexplore_mcp.judge.device_memory import out_of_memory
    from adaexplore_mcp.judge.referee import ReferenceFailure

    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (60 << 30, 80 << 30))  # the device looks free
    referee = _bare_referee

    died = ReferenceFailure("loading the reference: the process exited with code 70", died=True)
    assert died.worth_a_fresh_referee(referee("cuda")) and not died.worth_a_fresh_referee(referee("cpu"))
    raised = ReferenceFailure("the reference's forward raised RuntimeError: bad shape")
    assert not raised.worth_a_fresh_referee(referee("cuda"))  # its own error: retrying changes nothing
    assert out_of_memory(RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"))


class _ClosingPool:
    """A pool whose worker dies because the pool closes under it (the server stopping mid-evaluation)."""

    closed = False

    def lease(self, client=None, key=None):  # noqa: ANN001, ANN201 - the Pool's signature
        from contextlib import contextmanager

        from adaexplore_mcp.judge.processes import CallResult, WorkerConfig

        pool = self

        class _Worker:
            discard = False

            def call(self, request, timeout_s, progress):  # noqa: ANN001, ANN201
                pool.closed = True
                return CallResult("crashed", exitcode=70)

        @contextmanager
        def leased():  # noqa: ANN202
            yield WorkerConfig(slot=0, backend="cpu", home="", log_dir=""), _Worker()

        return leased()


def test_a_judge_closed_mid_evaluation_gives_no_verdict(tmp_path: Path) -> None:
    """Round 2 of the GPU campaign: the server, stopped at the round's time limit, stored 6 "crashed" verdicts
    (exit code 70 or none) in the 16 s it took to stop, and the search attached each as the kernel's failure. A worker killed by the judge's own closing says nothing about the kernel: no verdict, and the error
    says so in plain words wherever it surfaces (expand_nodes passes an item's error text on)."""
    from adaexplore_mcp.errors import error_message
    from adaexplore_mcp.judge import JudgeClosedError

    j = Judge(cpu_settings(tmp_path))
    j._pool = _ClosingPool()
    with pytest.raises(JudgeClosedError, match="no verdict was recorded") as caught:
        j.evaluate(task(), GOOD)
    assert error_message(caught.value).startswith("the judge closed while this kernel was being evaluated")
    from adaexplore_mcp.surface.common import ToolError, tool_errors

    with pytest.raises(ToolError, match="^the judge closed while this kernel was being evaluated"):
        with tool_errors():  # a tool's error says it too, not "internal error in api.py"
            raise caught.value


def test_the_referees_of_one_gpu_share_its_reference_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each referee cached references up to 40% of the GPU: 10 workers could hold 4 GPUs' worth. Round 2 of the
    campaign (H100 80 GB, 10 workers, six KernelBench tasks) ran out of device memory 14 times in 2.6 minutes
    (30 references dropped), and 3 of its 48 evaluations ended in an out-of-memory error. The judge tells each
    worker how many share its GPU, and each caches in its share."""
    import dataclasses

    import torch

    from adaexplore_mcp.judge import api
    from adaexplore_mcp.judge.referee import _default_budget

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda _: types.SimpleNamespace(total_memory=80 << 30))
    assert _default_budget("cuda") == int(0.4 * (80 << 30))
    assert _default_budget("cuda", 10) == int(0.4 * (80 << 30) / 10)
    monkeypatch.setattr(api, "_visible_gpus", lambda: ["0", "1"])
    settings = dataclasses.replace(cpu_settings(tmp_path), device="cuda", workers_per_gpu=3)
    j = Judge(settings)
    shares = sorted((c.cuda_visible, c.gpu_sharers) for c in j._pool._configs.values())
    assert shares == [("0", 3)] * 3 + [("1", 3)] * 3
