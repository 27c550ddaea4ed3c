"""End to end through a real MCP client over stdio: the server a user's assistant would launch."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.tiny import FLOOD_KERNEL, PURE_TORCH_KERNEL, SCALE_KERNEL, SCALE_TASK

pytestmark = pytest.mark.slow


def _params(home: Path) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "PYTHONPATH", "LANG")}
    env.update(ADAEXPLORE_HOME=str(home), ADAEXPLORE_DEVICE="cpu")
    return StdioServerParameters(command=sys.executable, args=["-m", "adaexplore_mcp"], env=env,
                                 cwd=str(Path(__file__).parents[1]))


def test_a_stdio_client_creates_a_task_and_gets_verdicts_for_good_and_cheating_kernels(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with Client(_params(tmp_path), read_timeout_seconds=240) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"create_task", "list_tasks", "evaluate_kernel"} <= names

            created = await client.call_tool("create_task", {"name": "scale", "reference_source": SCALE_TASK})
            assert not created.is_error, created.content
            task_id = created.structured_content["task_id"]
            assert created.structured_content["degenerate"] is False

            good = await client.call_tool("evaluate_kernel", {"task_id": task_id, "kernel_source": SCALE_KERNEL})
            assert good.structured_content["verdict"] == "passed", good.structured_content
            assert good.structured_content["speedup"] is None  # no GPU timing under the interpreter
            assert good.structured_content["timing_unavailable"]

            cheat = await client.call_tool("evaluate_kernel", {"task_id": task_id, "kernel_source": PURE_TORCH_KERNEL})
            assert cheat.structured_content["verdict"] == "rejected"
            assert cheat.structured_content["rejected"]["check"] == "no_triton_kernel"

            flood = await client.call_tool("evaluate_kernel", {"task_id": task_id, "kernel_source": FLOOD_KERNEL})
            assert flood.structured_content["verdict"] == "passed"  # its prints never reach the protocol stream

            unknown = await client.call_tool("evaluate_kernel", {"task_id": "nope", "kernel_source": SCALE_KERNEL})
            assert unknown.is_error and "unknown task_id" in unknown.content[0].text

    anyio.run(scenario)
