"""Issue 41 at the surface: results sized for a model, `next` as a count, excerpts without server paths.

The result sizes are measured on the real judge under the CPU interpreter (one evaluation per verdict, each
well under a second warm); `next` runs on a FakeJudge, which evaluates nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from adaexplore_mcp.app import App
from adaexplore_mcp.config import Settings
from adaexplore_mcp.search.fake_judge import FakeJudge
from adaexplore_mcp.server import build_server
from adaexplore_mcp.surface.lean import INTERNAL_EVALUATION_FIELDS, scrub_excerpt, scrub_paths
from tests.tiny import SCALE_KERNEL, SCALE_TASK

# What a model pays per evaluation by default (characters of the result's text); the full one was ~1.5-2.5k.
# A pass carries its measured precision (the candidate's error and the float32 reference's, vs float64).
LEAN_LIMITS = {"passed": 450, "compile_error": 1200, "runtime_error": 650, "mismatch": 750}
BROKEN = {
    "passed": SCALE_KERNEL,
    "compile_error": SCALE_KERNEL.replace("x * scale + 1.0", "x * scale + undefined_name"),
    "runtime_error": SCALE_KERNEL.replace("out = torch.empty_like(x)",
                                          "out = torch.empty_like(x)\n        raise RuntimeError('boom')"),
    "mismatch": SCALE_KERNEL.replace("+ 1.0, mask", "+ 2.0, mask"),
}


def run(app: App, scenario) -> Any:
    async def main():
        async with Client(build_server(app=app), read_timeout_seconds=300) as client:
            return await scenario(client)

    return anyio.run(main)


async def call(client: Client, tool: str, **args: Any) -> tuple[dict[str, Any], str]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    return result.structured_content, result.content[0].text


@pytest.fixture(scope="module")
def cpu_app(tmp_path_factory: pytest.TempPathFactory):
    app = App(Settings(home=tmp_path_factory.mktemp("home"), device="cpu"))
    yield app
    app.close()


def test_an_evaluation_result_carries_what_a_model_acts_on_and_detail_gives_the_rest(cpu_app: App) -> None:
    async def scenario(client: Client):
        task_id = (await call(client, "create_task", name="scale", reference_source=SCALE_TASK))[0]["task_id"]
        sizes, results = {}, {}
        for verdict, source in BROKEN.items():
            result, text = await call(client, "evaluate_kernel", task_id=task_id, kernel_source=source)
            assert result["verdict"] == verdict
            assert json.loads(text) == result  # the text a client shows is the same result, compact
            sizes[verdict], results[verdict] = len(text), result
        full, full_text = await call(client, "evaluate_kernel", task_id=task_id, kernel_source=SCALE_KERNEL,
                                     detail=True)
        stored = await client.read_resource(f"adaexplore://evaluations/{results['passed']['eval_id']}")
        return sizes, results, full, len(full_text), json.loads(stored.contents[0].text)

    sizes, results, full, full_size, stored = run(cpu_app, scenario)
    for verdict, size in sizes.items():
        assert size <= LEAN_LIMITS[verdict], (verdict, size, results[verdict])
    for result in results.values():
        assert not set(INTERNAL_EVALUATION_FIELDS) & set(result)
        assert "speedup" in result and "precision" in result
    assert results["compile_error"]["rules"] and results["compile_error"]["error"]["source_line"]
    assert results["mismatch"]["mismatch"]["worst_index"] and results["mismatch"]["tolerance"]["atol"]
    assert "tolerance" not in results["passed"]
    assert full["stages_ms"] and full["sandbox"] and full_size > 2 * sizes["passed"]  # detail=true: everything
    assert stored["stages_ms"] and stored["verdict"] == "passed"  # and the resource holds it all


def test_an_excerpt_keeps_the_candidates_and_tritons_frames_and_drops_the_servers() -> None:
    excerpt = "\n".join([
        '  File "/work/main/adaexplore_mcp/judge/runner.py", line 210, in run_trials',
        "    out = model(*inputs)",
        '  File "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1739, in _wrapped_call_impl',
        "    return self._call_impl(*args, **kwargs)",
        '  File "candidate.py", line 25, in forward',
        "    scale_kernel[(triton.cdiv(n, 128),)](x, out, n, self.scale, BLOCK=128)",
        '  File "/work/venv/lib/python3.11/site-packages/triton/runtime/interpreter.py", line 1100, in __call__',
        "    return self.fn(*args, **kwargs)",
        "NameError: name 'undefined_name' is not defined",
    ])
    scrubbed = scrub_excerpt(excerpt)
    assert "/work" not in scrubbed and "/usr" not in scrubbed and "adaexplore_mcp" not in scrubbed
    assert 'File "candidate.py", line 25, in forward' in scrubbed and "scale_kernel[" in scrubbed
    assert 'File "triton/runtime/interpreter.py", line 1100' in scrubbed
    assert "out = model(*inputs)" not in scrubbed and scrubbed.startswith("  (2 frames of the judge left out)")
    assert scrubbed.endswith("NameError: name 'undefined_name' is not defined")
    said = scrub_paths("No module named 'x' (in /work/main/adaexplore_mcp/judge/runner.py, from "
                       "/work/venv/lib/python3.11/site-packages/triton/language/core.py)")
    assert said == "No module named 'x' (in runner.py, from triton/language/core.py)"
    # a crash: the worker's faulthandler dump, cut by the judge inside the candidate's path
    dump = "\n".join([
        '890286977e5.py", line 25 in forward',
        '  File "/work/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1789 in _call_impl',
        '  File "/work/main/adaexplore_mcp/judge/processes/zygote.py", line 351 in <module>',
        '  File "<frozen runpy>", line 88 in _run_code', "",
        "Extension modules: numpy._core._multiarray_umath, torch._C (total: 2)",
    ])
    assert scrub_excerpt(dump) == '  (3 frames of the judge left out)\n  File "...890286977e5.py", line 25 in forward'


@pytest.fixture()
def fake_app(tmp_path: Path):
    app = App(Settings(home=tmp_path / "home", device="cpu"), judge=FakeJudge())
    yield app
    app.close()


def test_next_is_a_count_of_briefs_on_expand_node_and_expand_nodes(fake_app: App) -> None:
    async def scenario(client: Client):
        sid = (await call(client, "start_search", task_id="scaled_softmax", budget=10))[0]["search_id"]
        brief = (await call(client, "next_step", search_id=sid))[0]
        one, _ = await call(client, "expand_node", search_id=sid, step_id=brief["step_id"],
                            kernel_source="class ModelNew: pass  # fake: verdict=passed", next=True)
        two, _ = await call(client, "expand_node", search_id=sid, step_id=one["next_step"]["step_id"],
                            kernel_source="class ModelNew: pass  # 2", next=2)
        steps = [two["next_step"]["step_id"], *(b["step_id"] for b in two["next_step"]["more_steps"])]
        batch, _ = await call(client, "expand_nodes", search_id=sid, next=3, items=[
            {"step_id": s, "kernel_source": f"class ModelNew: pass  # {i + 3}"} for i, s in enumerate(steps)])
        none, _ = await call(client, "expand_node", search_id=sid, step_id=batch["next_step"]["step_id"],
                             kernel_source="class ModelNew: pass  # 9", next=0)
        bad = await client.call_tool("expand_node", {"search_id": sid, "step_id": "step_x",
                                                     "kernel_source": "x", "next": 9})
        return one, two, steps, batch, none, bad.content[0].text

    one, two, steps, batch, none, bad = run(fake_app, scenario)
    assert one["next_step"]["more_steps"] == []  # true is 1
    assert len(steps) == 2 and len(set(steps)) == 2  # next=2: two briefs
    assert [r["ok"] for r in batch["results"]] == [True, True]
    assert 1 + len(batch["next_step"]["more_steps"]) == 3
    assert "next_step" not in none or none["next_step"] is None
    assert "next must be a whole number of briefs from 0 to 8" in bad


def test_a_timeout_under_the_cpu_interpreter_names_the_interpreter_and_small_shapes() -> None:
    from adaexplore_mcp.surface.lean import lean_evaluation

    timeout = {"eval_id": "ev_1", "verdict": "timeout", "backend": "cpu-interpreter", "shapes": "full",
               "speedup": None, "warnings": []}
    note = lean_evaluation(timeout)["warnings"][-1]
    assert "CPU interpreter" in note and "TRITON_INTERPRET=1" in note and "small_shapes" in note
    assert "already runs at its small_shapes" in lean_evaluation({**timeout, "shapes": "small"})["warnings"][-1]
    assert "warnings" not in lean_evaluation({**timeout, "backend": "cuda"})


def test_the_prompt_teaches_one_call_per_step_each_verdict_and_when_to_stop() -> None:
    from adaexplore_mcp import prompts
    from adaexplore_mcp.prompts import optimize_module
    from adaexplore_mcp.search.types import MAX_BUDGET

    text = optimize_module("", 30)
    assert "budget=30" in text and "next=1" in text and "no separate next_step" in text
    assert "next_step(search_id, count=k)" in text and "expand_nodes(" in text and "next=k" in text
    for verdict in ("passed", "compile_error", "runtime_error", "mismatch", "timeout", "crashed", "rejected"):
        assert verdict in text
    assert "Stop when a result says `done`" in text and "small_shapes" in text
    assert prompts.MAX_BUDGET is MAX_BUDGET  # one limit, the one start_search checks


def test_a_scripted_proposer_following_the_prompt_makes_one_call_per_step(fake_app: App) -> None:
    """The prompt's loop: next_step once, then expand_node(next=1) until done; or next_step(count=2) once and
    expand_nodes(next=2) per round. Also the brief sizes a model reads (single and two at once)."""
    async def scenario(client: Client):
        calls = 0

        async def tool(name: str, **args: Any) -> tuple[dict[str, Any], str]:
            nonlocal calls
            calls += 1
            return await call(client, name, **args)

        sid = (await call(client, "start_search", task_id="scaled_softmax", budget=8))[0]["search_id"]
        brief, single = await tool("next_step", search_id=sid)
        steps = 0
        while not brief["done"]:
            result, _ = await tool("expand_node", search_id=sid, step_id=brief["step_id"], next=1,
                                   kernel_source=f"class ModelNew: pass  # {steps}")
            steps += 1
            if result["done"]:
                break
            brief = result["next_step"]
        one = calls / steps
        calls, steps = 0, 0
        sid = (await call(client, "start_search", task_id="scaled_softmax", budget=8))[0]["search_id"]
        brief, double = await tool("next_step", search_id=sid, count=2)
        while not brief["done"]:
            ids = [brief["step_id"], *(b["step_id"] for b in brief["more_steps"])]
            batch, _ = await tool("expand_nodes", search_id=sid, next=2, items=[
                {"step_id": s, "kernel_source": f"class ModelNew: pass  # b{steps + i}"} for i, s in enumerate(ids)])
            steps += len(ids)
            if not batch.get("next_step") or batch["next_step"]["done"]:
                break
            brief = batch["next_step"]
        return one, calls / steps, len(single), len(double)

    one, two, single, double = run(fake_app, scenario)
    assert one == 9 / 8 and two == 5 / 8  # the first next_step, then one call per step (per two steps)
    assert single < 6_000 and double < 12_000  # briefs a model reads (bench/first_contact.py records them)


def test_failure_clusters_says_why_it_is_empty(fake_app: App) -> None:
    async def scenario(client: Client):
        empty, _ = await call(client, "failure_clusters")
        sid = (await call(client, "start_search", task_id="scaled_softmax", budget=2))[0]["search_id"]
        brief, _ = await call(client, "next_step", search_id=sid)
        await call(client, "expand_node", search_id=sid, step_id=brief["step_id"],
                   kernel_source="class ModelNew: pass  # fake: verdict=compile_error")
        unripe, _ = await call(client, "failure_clusters")
        every, _ = await call(client, "failure_clusters", ripe_only=False)
        return empty, unripe, every

    empty, unripe, every = run(fake_app, scenario)
    assert empty["clusters"] == [] and "no failures recorded yet" in empty["note"]
    assert unripe["clusters"] == [] and "1 unripe cluster" in unripe["note"] and "ripe_only=false" in unripe["note"]
    assert len(every["clusters"]) == 1 and every.get("note") is None
