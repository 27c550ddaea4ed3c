"""The MCP surface in-process: names, schemas, the search loop, resources, jobs, bad input."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from jsonschema.validators import validator_for
from mcp import Client

from adaexplore_mcp.app import App
from adaexplore_mcp.config import Settings
from adaexplore_mcp.server import build_server
from tests.tiny import SCALE_KERNEL, SCALE_TASK

NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, shared_judge):
    app = App(Settings(home=tmp_path_factory.mktemp("home"), device="cpu"), judge=shared_judge)  # tests/conftest.py
    yield app
    app.store.close()  # the judge is the session's


def run(app: App, scenario) -> Any:
    async def main():
        async with Client(build_server(app=app), read_timeout_seconds=300) as client:
            return await scenario(client)

    return anyio.run(main)


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def error_text(client: Client, tool: str, **args: Any) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error, result.structured_content
    return result.content[0].text


def test_every_tool_has_a_valid_name_a_description_for_a_model_and_an_output_schema(app: App) -> None:
    async def scenario(client: Client):
        return (await client.list_tools()).tools

    tools = run(app, scenario)
    assert len(tools) >= 20
    for tool in tools:
        assert NAME.match(tool.name), tool.name
        assert tool.description and len(tool.description) > 60, tool.name
        assert tool.output_schema, tool.name


def test_a_search_runs_through_the_tools_and_a_bad_edit_leaves_the_step_pending(app: App) -> None:
    async def scenario(client: Client):
        task_id = (await call(client, "create_task", name="scale", reference_source=SCALE_TASK))["task_id"]
        search_id = (await call(client, "start_search", task_id=task_id, budget=2))["search_id"]
        brief = await call(client, "next_step", search_id=search_id)
        assert brief["kind"] == "large" and brief["steps_left"] == 2
        first = await call(client, "expand_node", search_id=search_id, step_id=brief["step_id"],
                           kernel_source=SCALE_KERNEL, note="fused scale")
        assert first["evaluation"]["verdict"] == "passed" and first["steps_left"] == 1

        brief = await call(client, "next_step", search_id=search_id)
        missing = await error_text(client, "expand_node", search_id=search_id, step_id=brief["step_id"],
                                   edits=[{"old": "BLOCK=4096", "new": "BLOCK=64"}])
        # a small step names the missing text; a large step says edits are for small steps
        assert ("BLOCK=4096" in missing) if brief["kind"] == "small" else ("small step" in missing)
        again = await call(client, "next_step", search_id=search_id)
        assert again["step_id"] == brief["step_id"]  # nothing was added, the same step is pending
        if again["kind"] == "small":
            done = await call(client, "expand_node", search_id=search_id, step_id=again["step_id"],
                              edits=[{"old": "BLOCK=128)", "new": "BLOCK=64)"}])
        else:
            done = await call(client, "expand_node", search_id=search_id, step_id=again["step_id"],
                              kernel_source=SCALE_KERNEL.replace("BLOCK=128", "BLOCK=64"))
        assert done["done"] and done["steps_left"] == 0
        reused = await error_text(client, "expand_node", search_id=search_id, step_id=again["step_id"],
                                  kernel_source=SCALE_KERNEL)
        assert "step" in reused

        final = await call(client, "next_step", search_id=search_id)
        assert final["done"] is True
        best = await call(client, "best_kernel", search_id=search_id)
        assert "ModelNew" in best["kernel_source"]
        exported = await call(client, "export_kernel", search_id=search_id)
        assert "get_inputs" in exported["source"] and Path(exported["path"]).exists()
        report = await call(client, "search_report", search_id=search_id)
        assert Path(report["html_path"]).exists()

        reference = await client.read_resource(f"adaexplore://tasks/{task_id}/reference")
        assert "class Model" in reference.contents[0].text
        kernel = await client.read_resource(f"adaexplore://searches/{search_id}/nodes/1/kernel")
        assert kernel.contents[0].text == SCALE_KERNEL
        tree = await client.read_resource(f"adaexplore://searches/{search_id}/tree")
        assert search_id in tree.contents[0].text
        html = await client.read_resource(f"adaexplore://searches/{search_id}/report.html")
        assert "<svg" in html.contents[0].text

    run(app, scenario)


def test_a_submitted_evaluation_can_be_polled_to_its_result(app: App) -> None:
    async def scenario(client: Client):
        task_id = (await call(client, "create_task", name="scale", reference_source=SCALE_TASK))["task_id"]
        job = await call(client, "submit_evaluation", task_id=task_id, kernel_source=SCALE_KERNEL)
        deadline = time.monotonic() + 120
        while job["status"] in ("queued", "running") and time.monotonic() < deadline:
            await anyio.sleep(0.2)
            job = await call(client, "get_job", job_id=job["job_id"])
        assert job["status"] == "done" and job["result"]["verdict"] == "passed"

    run(app, scenario)


def test_bad_inputs_are_tool_errors_that_say_what_to_fix(app: App) -> None:
    async def scenario(client: Client):
        assert "unknown task_id" in await error_text(client, "evaluate_kernel", task_id="nope", kernel_source="x")
        no_inputs = SCALE_TASK.replace("def get_inputs", "def make_inputs")
        assert "get_inputs" in await error_text(client, "create_task", name="bad", reference_source=no_inputs)
        assert "parse" in await error_text(client, "create_task", name="bad", reference_source="def (:")
        raising = SCALE_TASK.replace("return x * self.scale + 1.0", "raise RuntimeError('reference is broken')")
        assert "reference is broken" in await error_text(client, "create_task", name="bad",
                                                         reference_source=raising)
        huge = "# " + "x" * 300_000 + "\n"
        assert "limit" in await error_text(client, "evaluate_kernel", task_id="scaled_softmax", kernel_source=huge)
        assert "unknown" in await error_text(client, "next_step", search_id="srch_nope")
        assert "budget" in await error_text(client, "start_search", task_id="scaled_softmax", budget=0)
        assert "unknown job_id" in await error_text(client, "get_job", job_id="job_nope")

    run(app, scenario)


def test_the_rule_memory_and_the_prompt_are_served(app: App) -> None:
    async def scenario(client: Client):
        rules = await client.read_resource("adaexplore://rules")
        assert rules.contents[0].text.startswith("# adaexplore-mcp validity rules")
        skills = await call(client, "query_skills", text="tl.float32")
        assert skills["rules"]
        prompt = await client.get_prompt("optimize_module", {"budget": "10"})
        text = prompt.messages[0].content.text
        assert "create_task" in text and "next_step" in text and "expand_node" in text

    run(app, scenario)


DEGENERATE_TASK = SCALE_TASK.replace("return x * self.scale + 1.0", "return torch.relu(x - 100.0) * self.scale")

ZEROS_KERNEL = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def zeros_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        zeros_kernel[(triton.cdiv(x.numel(), 128),)](out, x.numel(), BLOCK=128)
        return out
'''


def test_a_constant_output_passes_a_degenerate_task_only_with_the_task_flagged_on_the_result(app: App) -> None:
    async def scenario(client: Client):
        created = await call(client, "create_task", name="degenerate", reference_source=DEGENERATE_TASK)
        assert created["degenerate"] is True and created["warnings"]
        result = await call(client, "evaluate_kernel", task_id=created["task_id"], kernel_source=ZEROS_KERNEL)
        assert result["verdict"] == "passed"
        assert result["degenerate_task"] is True
        assert any("degenerate" in w for w in result["warnings"])
        honest_task = (await call(client, "create_task", name="scale", reference_source=SCALE_TASK))["task_id"]
        honest = await call(client, "evaluate_kernel", task_id=honest_task, kernel_source=ZEROS_KERNEL)
        assert honest["verdict"] == "mismatch" and honest["degenerate_task"] is False

    run(app, scenario)


def test_creating_the_same_task_again_returns_the_same_id_without_running_it_again(
        app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    probes: list[str] = []
    real_probe = app.judge.probe_task
    monkeypatch.setattr(app.judge, "probe_task", lambda spec, **kw: probes.append(spec.name) or real_probe(spec, **kw))

    async def scenario(client: Client):
        first = await call(client, "create_task", name="same", reference_source=SCALE_TASK)
        second = await call(client, "create_task", name="same", reference_source=SCALE_TASK)
        assert second["task_id"] == first["task_id"] and second["created"] is False
        other = await call(client, "create_task", name="same", reference_source=SCALE_TASK + "\n# changed\n")
        assert other["task_id"] != first["task_id"]

    run(app, scenario)
    assert probes == ["same", "same"]  # the first and the changed source ran; the repeat did not


def test_tools_carry_hints_and_ids_complete_in_resource_uris(app: App) -> None:
    from mcp.types import ResourceTemplateReference

    async def scenario(client: Client):
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["list_tasks"].annotations.read_only_hint is True
        assert tools["expand_node"].annotations.read_only_hint is False
        assert all(t.annotations and t.annotations.open_world_hint is False for t in tools.values())
        ref = ResourceTemplateReference(type="ref/resource", uri="adaexplore://tasks/{task_id}/reference")
        done = await client.complete(ref, {"name": "task_id", "value": "scal"})
        values = done.completion.values
        assert {"scale_bias_gelu", "scaled_softmax"} <= set(values) and all(v.startswith("scal") for v in values)
        assert "swish_scale_clamp" not in values

    run(app, scenario)


# The budget of issue 41: a client that forwards tools/list to its model paid ~153 kB (141 kB output schemas).
TOOLS_LIST_LIMIT = 40_000


def test_the_tool_list_is_lean_and_its_output_schemas_still_accept_the_results(app: App) -> None:
    """tools/list as it goes on the wire stays under TOOLS_LIST_LIMIT bytes; every type is described once (an
    expand_node result names evaluate_kernel's evaluation); the client validates results against the lean
    schemas (the search and evaluation tests above run through the same client)."""
    async def scenario(client: Client):
        return await client.list_tools()

    listed = run(app, scenario)
    wire = listed.model_dump_json(by_alias=True, exclude_none=True)
    assert len(wire.encode()) < TOOLS_LIST_LIMIT, len(wire)
    tools = {t.name: t for t in listed.tools}
    for tool in listed.tools:  # still valid JSON Schema, as a validating client compiles them
        for schema in (tool.input_schema, tool.output_schema):
            validator_for(schema).check_schema(schema)
        assert tool.output_schema["type"] == "object", tool.name  # the MCP spec: an object at the root
    expand = tools["expand_node"].output_schema
    assert expand["$defs"]["Evaluation"] == {"type": "object", "description": "as evaluate_kernel returns it"}
    assert "title" not in wire and '"stages_ms"' not in wire and "errors.pydantic.dev" not in wire
    assert tools["evaluate_kernel"].output_schema["properties"]["verdict"]  # described at its home
    assert tools["next_step"].output_schema["$defs"]["Brief"]["properties"]["parent_kernel"]["description"]
    # `next` is a count on both (expand_node still takes the old boolean: true = 1)
    assert tools["expand_nodes"].input_schema["properties"]["next"] == {"default": 0, "type": "integer"}
    assert tools["expand_node"].input_schema["properties"]["next"] == {
        "anyOf": [{"type": "integer"}, {"type": "boolean"}], "default": 0}
