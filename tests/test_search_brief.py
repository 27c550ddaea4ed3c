"""The step brief: a few rules chosen for the step, working memory as diffs, the shapes and device really used,
the reference in the first brief (and get_task), honesty without timing, and its size on a scripted search."""

from __future__ import annotations

import difflib
import io
import json
import textwrap
from pathlib import Path

import anyio
import pytest
from mcp import Client

from adaexplore_mcp.app import App
from adaexplore_mcp.config import Settings
from adaexplore_mcp.demo import outcome, print_tree
from adaexplore_mcp.export.report_html import report_html
from adaexplore_mcp.export.snapshot import TreeSnapshot
from adaexplore_mcp.models import RuleRef, TaskInfo
from adaexplore_mcp.search import SearchService
from adaexplore_mcp.search import brief as B
from adaexplore_mcp.search.fake_judge import FakeEvaluator, FakeJudge
from adaexplore_mcp.search.records import NodeRecord
from adaexplore_mcp.server import build_server
from adaexplore_mcp.store import Store
from bench.brief_size import measure
from tests.tiny import SCALE_TASK

RULES = [RuleRef(rule_id=f"r{k}", text=f"Always respect rule number {k} about widgets.") for k in range(12)]
ARANGE = RuleRef(rule_id="r-arange", text="You cannot pass a runtime value to tl.arange; its bounds must be tl.constexpr.")
SMALL = {"batch_size": 8, "hidden": 100}


def kernel(block: int = 1024, warps: int = 4, verdict: str = "passed") -> str:
    return textwrap.dedent(f"""\
        import triton
        import triton.language as tl
        BLOCK_SIZE = {block}
        NUM_WARPS = {warps}

        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

        class ModelNew:
            pass
        # fake: verdict={verdict} speedup=none
        """)


def service(tmp_path: Path, timing: bool = False, rules=RULES, **kw) -> SearchService:
    store = Store(tmp_path / "db.sqlite3")
    tasks = lambda task_id: TaskInfo(task_id=task_id, name=task_id, small_shapes=SMALL)  # noqa: E731
    return SearchService(store, FakeEvaluator(store, tasks=tasks, rules=rules, timing_available=timing), **kw)


def chain(svc: SearchService, steps: list[dict]) -> str:
    """A search whose first step writes kernel() and whose next steps edit their parent (p_large=0)."""
    sid = svc.start_search("t", 20, p_large=0.0, c=0.0, c_e=0.0)
    b = svc.next_step(sid)
    svc.expand_node(sid, b.step_id, kernel_source=kernel(), note="first")
    for step in steps:
        b = svc.next_step(sid)
        svc.expand_node(sid, b.step_id, **step)
    return sid


# -- rules ---------------------------------------------------------------------------------------

def test_the_brief_shows_at_most_five_rules_and_counts_the_others(tmp_path):
    brief = service(tmp_path).next_step(service(tmp_path).start_search("t", 3))
    assert [r.rule_id for r in brief.rules] == ["r0", "r1", "r2", "r3", "r4"]  # the memory's order at the root
    assert brief.rules_more == 7 and brief.rules_uri == "adaexplore://rules"
    assert "rules_more" in brief.instructions


def test_rules_about_the_parents_tl_apis_come_first(tmp_path):
    svc = service(tmp_path, rules=[*RULES, ARANGE])
    sid = chain(svc, [])
    brief = svc.next_step(sid)
    assert brief.kind == "small" and brief.rules[0].rule_id == "r-arange" and brief.rules_more == 8


def test_a_rule_the_chains_failure_fell_under_is_shown_first_even_when_the_memory_did_not_list_it():
    failed = NodeRecord(node_id=2, parent_id=1, kind="small", depth=2, verdict="compile_error", speedup=None,
                        reward=0.0, visits=1, total_reward=0.0, max_reward=0.0, note="", created_at=0.0,
                        kernel_source="x = 1", evaluation=json.dumps({
                            "error": {"exception": "CompilationError", "message": "widgets are broken"},
                            "rules": [{"rule_id": "r-named", "text": "You cannot break widgets."}]}))
    named, failures = B.failure_context([2], {2: failed})
    assert [r.rule_id for r in named] == ["r-named"] and "widgets are broken" in failures[0]
    shown, more = B.pick_rules([*named, *RULES], [r.rule_id for r in named], failures, "")
    assert shown[0].rule_id == "r-named" and len(shown) == 5 and more == 8


# -- working memory ------------------------------------------------------------------------------

def test_working_memory_shows_the_parent_whole_and_older_nodes_as_diffs_against_the_next(tmp_path):
    svc = service(tmp_path)
    sid = chain(svc, [
        {"edits": [{"old": "BLOCK_SIZE = 1024", "new": "BLOCK_SIZE = 512"}], "note": "block 512"},
        {"edits": [{"old": "NUM_WARPS = 4", "new": "NUM_WARPS = 8"}], "note": "warps 8"},
    ])
    brief = svc.next_step(sid)
    memory = brief.working_memory
    assert [m.node_id for m in memory] == [1, 2, 3] and brief.parent_node_id == 3
    assert brief.parent_kernel == svc.node_kernel(sid, 3)
    assert memory[-1].diff is None and memory[-1].kernel is None
    assert all(m.kernel is None for m in memory) and [m.diff_base for m in memory] == [2, 3, None]
    assert "-BLOCK_SIZE = 512\n+BLOCK_SIZE = 1024" in memory[0].diff
    assert "-NUM_WARPS = 8\n+NUM_WARPS = 4" in memory[1].diff and "-BLOCK_SIZE" not in memory[1].diff
    # each diff rebuilds its node from the next one: the chain is recoverable from the parent backwards
    for entry, base in ((memory[1], 3), (memory[0], 2)):
        lines = entry.diff.splitlines()
        assert lines[:2] == [f"--- node {base}", f"+++ node {entry.node_id}"]
    full = difflib.unified_diff(svc.node_kernel(sid, 2).splitlines(), svc.node_kernel(sid, 1).splitlines(),
                                "node 2", "node 1", n=B.DIFF_CONTEXT, lineterm="")
    assert memory[0].diff == "\n".join(full)
    assert len(memory[0].diff) < len(svc.node_kernel(sid, 1)) / 2


def test_a_huge_diff_is_cut_and_points_to_the_full_source():
    text, cut = B.source_diff("a\n" * 10, "".join(f"line {k}\n" for k in range(2000)), 3, 2)
    assert cut and len(text) <= B.DIFF_CHARS and "kernel_uri" in text
    assert B.source_diff("same\n", "same\n", 3, 2) == ("(identical to node 3)", False)


# -- shapes, device, reference ------------------------------------------------------------------

def test_on_the_cpu_the_brief_names_the_small_shapes_run_and_says_there_is_no_timing(tmp_path):
    brief = service(tmp_path).next_step(service(tmp_path).start_search("t", 3))
    assert "batch_size=8, hidden=100" in brief.evaluated_shapes and "CPU interpreter" in brief.evaluated_shapes
    assert brief.device == "CPU interpreter, no timing" and brief.timing_available is False
    assert B.CPU_HONEST in brief.timing_note and "No timing: correctness only" in brief.instructions


def test_on_a_gpu_the_brief_names_the_full_shapes_and_the_gpu(tmp_path):
    svc = service(tmp_path, timing=True, gpu="NVIDIA H100 80GB HBM3")
    brief = svc.next_step(svc.start_search("t", 3))
    assert "full shapes" in brief.evaluated_shapes and brief.device == "NVIDIA H100 80GB HBM3"
    assert B.CPU_HONEST not in brief.instructions


@pytest.fixture
def app(tmp_path):
    app = App(Settings(home=tmp_path / "home", device="cpu"), judge=FakeJudge())
    yield app
    app.close()


def test_the_first_brief_carries_the_reference_source_and_later_small_steps_do_not(app):
    info, _ = app.create_task("scale", SCALE_TASK, small_shapes={"n_rows": 2})
    sid = app.search.start_search(info.task_id, 5, p_large=0.0)
    first = app.search.next_step(sid)
    assert first.parent_node_id == 0 and first.reference_source == app.tasks.spec(info.task_id).source
    assert "reference_source in this brief" in first.instructions and "n_rows=2" in first.evaluated_shapes
    app.search.expand_node(sid, first.step_id, kernel_source=kernel())
    second = app.search.next_step(sid)
    assert second.kind == "small" and second.reference_source is None


def test_get_task_returns_the_reference_source_through_mcp(app):
    info, _ = app.create_task("scale", SCALE_TASK, small_shapes={"n_rows": 2})

    async def scenario():
        async with Client(build_server(app=app), read_timeout_seconds=60) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            result = await client.call_tool("get_task", {"task_id": info.task_id})
            missing = await client.call_tool("get_task", {"task_id": "nope"})
            return tools["get_task"], result, missing

    tool, result, missing = anyio.run(scenario)
    assert "reference_source" in tool.description and tool.output_schema
    detail = result.structured_content
    assert not result.is_error and detail["reference_source"] == SCALE_TASK and detail["name"] == "scale"
    assert "n_rows=2" in detail["evaluated_shapes"] and detail["device"] == "CPU interpreter, no timing"
    assert missing.is_error and "unknown task_id" in missing.content[0].text


# -- honest without timing ----------------------------------------------------------------------

def _snapshot(speedups: list[float | None]) -> TreeSnapshot:
    nodes = [{"node_id": 0, "parent_id": None, "kind": "root"}]
    nodes += [{"node_id": k + 1, "parent_id": 0, "kind": "large", "verdict": "passed", "speedup": s,
               "step_index": k + 1} for k, s in enumerate(speedups)]
    return TreeSnapshot(search_id="s", task_name="t", budget=5, nodes=nodes)


def test_the_report_and_the_demo_name_no_best_speedup_without_timing():
    page = report_html(_snapshot([None, None]))
    assert B.CPU_HONEST in page and "best speedup</th>" not in page and "first correct" in page
    timed = report_html(_snapshot([1.5, 2.5]))
    assert "best speedup</th><td>2.50x" in timed and B.CPU_HONEST not in timed
    assert outcome(1, None, timed=False) == f"{B.CPU_HONEST} (first correct: node 1)"
    assert outcome(2, 2.5, timed=True) == "best: node 2, speedup 2.50x"
    print_tree([{"node_id": 0, "parent_id": None, "kind": "root"},
                {"node_id": 1, "parent_id": 0, "kind": "large", "verdict": "passed", "speedup": None, "note": ""}],
               1, out=(out := io.StringIO()), timed=False)
    assert "<- first correct" in out.getvalue()


# -- size ----------------------------------------------------------------------------------------

def test_the_median_brief_of_a_scripted_search_is_at_most_6000_characters(tmp_path):
    stats = measure("rmsnorm", 15, seed=0, home=tmp_path)
    assert stats.steps == 15 and stats.median <= 6000, stats
    assert stats.calls_per_step < 2.1  # next_step + expand_node; the reference comes with the first brief
