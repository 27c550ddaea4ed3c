"""The timed block's protocol (referee_timing._block and the runner's priming), without a GPU.

On a GPU a fresh candidate process paid cudaMalloc inside its timed calls, which made its kernels look
2-4x slower than an independent harness measured them (bench/timing_agreement.py): the runner now runs
a block's calls once untimed, says "primed", and the referee's wall clock starts only then.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import torch

from adaexplore_mcp.judge import referee_timing, wire
from adaexplore_mcp.judge.runner import Runner


@pytest.fixture(autouse=True)
def _no_cuda_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)


def test_the_wall_clock_starts_when_the_runner_says_primed() -> None:
    sent: list[dict] = []

    def call(header: dict, buffers: list) -> tuple[dict, list]:
        sent.append(header)
        time.sleep(0.2)  # the untimed pass: not the candidate's time
        return {"primed": True}, []

    def more() -> tuple[dict, list]:
        time.sleep(0.02)
        return {"times_ms": [0.5, 0.5], "outputs": []}, []

    times, wall, outs = referee_timing._block(call, more, {"calls": 2}, [])
    assert sent[0]["op"] == "time" and sent[0]["prime"] is True and sent[0]["calls"] == 2
    assert times == [0.5, 0.5] and outs == []
    assert 15 <= wall < 150, wall


def test_a_runner_that_never_says_primed_is_timed_from_the_request() -> None:
    def call(header: dict, buffers: list) -> tuple[dict, list]:
        time.sleep(0.1)
        return {"times_ms": [0.5], "outputs": []}, []

    def more() -> tuple[dict, list]:
        raise AssertionError("no second message was announced")

    _, wall, _ = referee_timing._block(call, more, {"calls": 1}, [])
    assert wall >= 90, wall


def test_a_failure_during_priming_comes_back_as_the_blocks_answer() -> None:
    failure = {"verdict": "runtime_error", "error": {"exception": "RuntimeError", "message": "boom"}}
    times, wall, outs = referee_timing._block(lambda h, b: (failure, []), lambda: ({}, []), {"calls": 3}, [])
    assert times == [] and wall == 0.0 and outs == [failure]


class _Conn:
    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def send_bytes(self, data: bytes) -> None:
        self.frames.append(bytes(data))


def test_priming_runs_every_call_once_keeping_their_outputs_then_says_primed() -> None:
    import weakref

    runner = Runner.__new__(Runner)
    runner.conn = _Conn()
    outputs: list[weakref.ref] = []
    alive_at_each_call: list[int] = []

    def model(x: torch.Tensor) -> torch.Tensor:
        alive_at_each_call.append(sum(r() is not None for r in outputs))
        out = x + 1
        outputs.append(weakref.ref(out))
        return out

    runner._prime(model, [[torch.zeros(3)], [torch.ones(3)]], 5)
    assert alive_at_each_call == [0, 1, 2, 3, 4]  # all alive together, as the timed pass keeps them
    assert all(r() is None for r in outputs)  # then dropped: their memory goes back to the allocator
    header = wire.json.loads(runner.conn.frames[0].decode())
    assert header["primed"] is True
