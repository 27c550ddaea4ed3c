"""What a new assistant pays on first contact with the server, over MCP (issue 41). Not a test.

Why: a client forwards `tools/list` (often with output schemas) to its model before the first call, and then
every brief and every result; these are the server's token costs. Everything goes through an in-process MCP
client (the same JSON a stdio client gets):

- tools/list: bytes on the wire, the output schemas' share, the five largest tools;
- brief sizes: next_step(count=1) and next_step(count=2), characters of the text a client shows;
- tool calls per step for a scripted proposer that follows the `optimize_module` prompt: one call per step
  (expand_node(next=1)), several steps per call (next_step(count=k) once, then expand_nodes(next=k)), and
  the old two-call loop (next_step, then expand_node) for comparison; searches run on the fake judge;
- result size by verdict: one evaluation per verdict on the real judge (CPU interpreter here), the default
  (lean) result and the whole one (detail=true).

    python bench/first_contact.py                 # all of it (~1 minute on a CPU: the judge's workers start)
    python bench/first_contact.py --no-judge      # without the real judge (no result sizes)
    python bench/first_contact.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from mcp import Client  # noqa: E402

from adaexplore_mcp.app import App  # noqa: E402
from adaexplore_mcp.config import Settings  # noqa: E402
from adaexplore_mcp.search.fake_judge import FakeJudge  # noqa: E402
from adaexplore_mcp.server import build_server  # noqa: E402
from tests.tiny import SCALE_KERNEL, SCALE_TASK  # noqa: E402

TASK = "scaled_softmax"  # a built-in task: its reference and seed rules are in every first brief
KERNEL = "import torch\nclass ModelNew(torch.nn.Module):\n    pass  # fake: verdict={verdict} speedup={speedup}\n"
VERDICTS = {  # one candidate per verdict on the tiny scale task (tests/tiny.py)
    "passed": SCALE_KERNEL,
    "compile_error": SCALE_KERNEL.replace("x * scale + 1.0", "x * scale + undefined_name"),
    "runtime_error": SCALE_KERNEL.replace("out = torch.empty_like(x)",
                                          "out = torch.empty_like(x)\n        raise RuntimeError('boom')"),
    "mismatch": SCALE_KERNEL.replace("+ 1.0, mask", "+ 2.0, mask"),
}


class Counter:
    """An MCP client that counts its tool calls and measures what each returns."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.calls = 0

    async def __call__(self, tool: str, **args: Any) -> tuple[dict[str, Any], int]:
        self.calls += 1
        result = await self.client.call_tool(tool, args)
        if result.is_error:
            raise RuntimeError(f"{tool}: {result.content[0].text}")
        return result.structured_content, len(result.content[0].text)


def kernel(i: int) -> str:
    verdict = "passed" if i % 3 else "compile_error"  # a third of them fail, as first drafts do
    return KERNEL.format(verdict=verdict, speedup=f"{1 + i / 10:.1f}" if verdict == "passed" else "none")


async def tool_list(client: Client) -> dict[str, Any]:
    listed = await client.list_tools()
    wire = listed.model_dump_json(by_alias=True, exclude_none=True)
    per_tool = {t.name: len(t.model_dump_json(by_alias=True, exclude_none=True)) for t in listed.tools}
    schemas = sum(len(json.dumps(t.output_schema, separators=(",", ":"))) for t in listed.tools if t.output_schema)
    largest = sorted(per_tool.items(), key=lambda kv: -kv[1])[:5]
    return {"tools": len(listed.tools), "bytes": len(wire.encode()), "output_schema_bytes": schemas,
            "largest": largest}


async def briefs(call: Counter) -> dict[str, int]:
    search = (await call("start_search", task_id=TASK, budget=6))[0]["search_id"]
    first, single = await call("next_step", search_id=search)
    await call("expand_node", search_id=search, step_id=first["step_id"], kernel_source=kernel(1))
    later, later_single = await call("next_step", search_id=search)
    _, double = await call("next_step", search_id=search, count=2)
    return {"first brief (count=1)": single, "later brief (count=1)": later_single, "next_step(count=2)": double}


async def loop(call: Counter, mode: str, budget: int, k: int = 2) -> dict[str, Any]:
    """A scripted proposer following a loop; the tool calls from the first next_step to `done`, per step."""
    search = (await call("start_search", task_id=TASK, budget=budget))[0]["search_id"]
    start, steps, sizes = call.calls, 0, []
    if mode == "two calls (next_step, expand_node)":
        while True:
            brief, _ = await call("next_step", search_id=search)
            if brief["done"]:
                break
            result, size = await call("expand_node", search_id=search, step_id=brief["step_id"],
                                      kernel_source=kernel(steps), note="scripted")
            steps, sizes = steps + 1, sizes + [size]
    elif mode == "expand_node(next=1)":
        brief, _ = await call("next_step", search_id=search)
        while not brief["done"]:
            result, size = await call("expand_node", search_id=search, step_id=brief["step_id"],
                                      kernel_source=kernel(steps), note="scripted", next=1)
            steps, sizes = steps + 1, sizes + [size]
            if result["done"] or not result.get("next_step"):
                break
            brief = result["next_step"]
    else:  # next_step(count=k) once, then expand_nodes(next=k) each round
        brief, _ = await call("next_step", search_id=search, count=k)
        while not brief["done"]:
            ids = [brief["step_id"], *(b["step_id"] for b in brief.get("more_steps", []))]
            items = [{"step_id": s, "kernel_source": kernel(steps + i), "note": "scripted"} for i, s in enumerate(ids)]
            batch, size = await call("expand_nodes", search_id=search, items=items, next=k)
            steps, sizes = steps + len(ids), sizes + [size]
            if not batch.get("next_step") or batch["next_step"]["done"]:
                break
            brief = batch["next_step"]
    calls = call.calls - start
    return {"steps": steps, "calls": calls, "calls_per_step": round(calls / max(steps, 1), 2),
            "median_result_chars": sorted(sizes)[len(sizes) // 2] if sizes else 0}


async def verdict_sizes(client: Client) -> dict[str, dict[str, int]]:
    call = Counter(client)
    task = (await call("create_task", name="first-contact-scale", reference_source=SCALE_TASK))[0]["task_id"]
    sizes = {}
    for verdict, source in VERDICTS.items():
        lean, lean_size = await call("evaluate_kernel", task_id=task, kernel_source=source)
        full, full_size = await call("evaluate_kernel", task_id=task, kernel_source=source, detail=True)
        sizes[verdict] = {"verdict": lean["verdict"], "default": lean_size, "detail": full_size}
    return sizes


def fake_part(home: Path, budget: int) -> dict[str, Any]:
    app = App(Settings(home=home / "fake", device="cpu"), judge=FakeJudge())

    async def main():
        async with Client(build_server(app=app), read_timeout_seconds=300) as client:
            call = Counter(client)
            out = {"tools_list": await tool_list(client), "briefs": await briefs(call), "loops": {}}
            for mode in ("two calls (next_step, expand_node)", "expand_node(next=1)", "expand_nodes(next=2)"):
                out["loops"][mode] = await loop(call, mode, budget)
            return out

    try:
        return anyio.run(main)
    finally:
        app.close()


def judge_part(home: Path) -> dict[str, Any]:
    app = App(Settings(home=home / "judge", device="cpu"))

    async def main():
        async with Client(build_server(app=app), read_timeout_seconds=300) as client:
            return {"backend": app.judge.backend, "results": await verdict_sizes(client)}

    try:
        return anyio.run(main)
    finally:
        app.close()


def report(data: dict[str, Any]) -> str:
    tl = data["tools_list"]
    lines = ["| measure | value |", "| --- | --- |",
             f"| tools/list ({tl['tools']} tools), bytes on the wire | {tl['bytes']:,} |",
             f"| of which output schemas | {tl['output_schema_bytes']:,} |",
             "| largest tools | " + ", ".join(f"{n} {b:,}" for n, b in tl["largest"]) + " |"]
    for name, size in data["briefs"].items():
        lines.append(f"| {name}, characters | {size:,} |")
    for mode, row in data["loops"].items():
        lines.append(f"| calls per step: {mode} | {row['calls_per_step']} ({row['calls']} calls, {row['steps']} "
                     f"steps; median result {row['median_result_chars']:,} characters) |")
    for verdict, row in data.get("judge", {}).get("results", {}).items():
        lines.append(f"| {verdict} result ({data['judge']['backend']}), characters: default / detail=true | "
                     f"{row['default']:,} / {row['detail']:,} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=12, help="steps of each scripted search")
    parser.add_argument("--no-judge", action="store_true", help="skip the result sizes on the real judge")
    parser.add_argument("--json", type=Path, help="also write the numbers as JSON here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = fake_part(Path(tmp), args.budget)
        if not args.no_judge:
            data["judge"] = judge_part(Path(tmp))
    from importlib.metadata import version

    data["versions"] = {"python": platform.python_version(), "mcp": version("mcp"), "torch": version("torch"),
                        "triton": version("triton"), "machine": f"{platform.machine()}, {_cores()} cores"}
    print(report(data))
    print("\n" + ", ".join(f"{k} {v}" for k, v in data["versions"].items()))
    if args.json:
        args.json.write_text(json.dumps(data, indent=1))


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 0


if __name__ == "__main__":
    main()
