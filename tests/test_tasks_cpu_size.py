"""The CPU path says what it is (issue 41, item 6): a task too large for the CPU is never run at full size.

create_task reads the inputs' size from the source alone; above CPU_FULL_SIZE_ELEMENTS (or the runner's memory)
it probes the reference at the suggested small_shapes only and registers the task there, saying so.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client

from adaexplore_mcp.app import App
from adaexplore_mcp.config import Settings
from adaexplore_mcp.models import TaskProbe
from adaexplore_mcp.server import build_server
from adaexplore_mcp.tasks.cpu_size import CPU_FULL_SIZE_ELEMENTS, cpu_size_check
from adaexplore_mcp.tasks.format import TaskFormatError

# A KernelBench level-2 shape: 128 x 64 x 128 x 128 inputs (134M elements, 512 MB of float32).
HUGE_CONV = '''
import torch
import torch.nn as nn

batch_size = 128
in_channels = 64
out_channels = 8
height = 128
width = 128
kernel_size = 3


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
'''


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory):
    app = App(Settings(home=tmp_path_factory.mktemp("home"), device="cpu"))
    yield app
    app.close()


@pytest.fixture
def probes(app: App, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    real = app.judge.probe_task
    monkeypatch.setattr(app.judge, "probe_task",
                        lambda spec, **kw: seen.append(dict(spec.small_shapes)) or real(spec, **kw))
    return seen


def create(app: App, **args: Any) -> dict[str, Any]:
    async def main():
        async with Client(build_server(app=app), read_timeout_seconds=300) as client:
            result = await client.call_tool("create_task", args)
            assert not result.is_error, result.content[0].text
            return result.structured_content

    return anyio.run(main)


def test_the_check_reads_the_size_from_the_source_and_estimates_memory_and_time() -> None:
    check = cpu_size_check(HUGE_CONV, memory_limit=8 << 30)
    assert check is not None and check.suggestion.full_elements == 128 * 64 * 128 * 128 > CPU_FULL_SIZE_ELEMENTS
    text = check.estimate()
    assert "134,217,728 elements" in text and "512 MB" in text and "8.0 GB" in text and "hours" in text
    small = HUGE_CONV.replace("height = 128", "height = 8").replace("width = 128", "width = 8")
    assert cpu_size_check(small, memory_limit=8 << 30) is None  # 524k elements: run at full size as before
    assert cpu_size_check(small, memory_limit=1 << 20) is not None  # ... unless the runner's memory is tiny


def test_a_task_too_large_for_the_cpu_is_registered_at_checked_small_shapes_and_says_so(app: App, probes) -> None:
    created = create(app, name="huge-conv", reference_source=HUGE_CONV)
    shapes = created["small_shapes"]
    assert created["created"] is True and shapes and probes == [shapes]  # never probed at full size
    assert shapes["batch_size"] < 128 and shapes["height"] < 128
    warning = next(w for w in created["warnings"] if w.startswith("registered at small_shapes="))
    assert "checked: the reference runs at them" in warning and "512 MB" in warning and "GPU" in warning
    again = create(app, name="huge-conv", reference_source=HUGE_CONV)
    assert again["created"] is False and again["task_id"] == created["task_id"] and probes == [shapes]
    assert any(w.startswith("registered at small_shapes=") for w in again["warnings"])


def test_small_shapes_the_reference_rejects_are_an_error_with_the_estimate_not_a_full_size_run(
        app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, Any]] = []

    def probe(spec, **kw):
        seen.append(dict(spec.small_shapes))
        return TaskProbe(ok=False, error="the reference's forward raised RuntimeError: groups must divide channels")

    monkeypatch.setattr(app.judge, "probe_task", probe)
    with pytest.raises(TaskFormatError) as info:
        app.create_task("huge-conv-rejected", HUGE_CONV)
    text = str(info.value)
    assert "too large for the CPU interpreter" in text and "not run at full size" in text
    assert "groups must divide channels" in text and "Pass small_shapes" in text
    assert len(seen) == 1 and seen[0]  # one probe, at the small shapes
