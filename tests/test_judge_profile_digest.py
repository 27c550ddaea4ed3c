"""The profile digest on the CPU: synthetic profiler events in, a compact per-call summary out; the runner's
wire form round-trips; and profile_kernel through the MCP surface (no GPU: it says so; with a judge that
profiles, the digest and the full-table resource)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from mcp import Client

from adaexplore_mcp.app import App
from adaexplore_mcp.config import Settings
from adaexplore_mcp.judge import Judge
from adaexplore_mcp.judge.profile_digest import (
    CALL_MARK, NO_GPU, Event, ProfileResult, collect, compact_name, digest, full_table, parse_events,
)
from adaexplore_mcp.search.fake_judge import FakeJudge
from adaexplore_mcp.server import build_server
from adaexplore_mcp.tasks.format import TaskSpec

GEMM = ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(cutlass_80_tensorop_s1688gemm"
        "_128x128_32x3_nn_align4::Params)")
ELEMENTWISE = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_"
               "scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()"
               "#1}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, float, at::detail::"
               "Array<char*, 2>)")


def _call(start: float, ops: list[tuple[str, str, float, float]], dur: float) -> list[Event]:
    """One call mark at `start` lasting `dur`, and device ops at offsets from it."""
    return [Event("call", CALL_MARK, start, dur)] + [Event(k, n, start + s, d) for k, n, s, d in ops]


def _two_calls() -> list[Event]:
    ops = [("kernel", "my_fused_kernel", 10.0, 30.0), ("kernel", GEMM, 45.0, 50.0),
           ("kernel", GEMM, 90.0, 10.0),  # overlaps the previous one by 5 µs (two streams)
           ("memcpy", "Memcpy DtoD (Device -> Device)", 120.0, 5.0)]
    return _call(0.0, ops, 150.0) + _call(1000.0, ops, 150.0) + [Event("launch", "cudaLaunchKernel", 5.0, 2.0)]


def test_a_digest_summarizes_each_call_the_costliest_kernels_own_ones_and_copies() -> None:
    side = digest(_two_calls(), runs=2, own=["my_fused_kernel"])
    assert side.calls == 2 and side.wall_us == 150.0 and side.launches == 4.0
    assert side.device_busy_us == pytest.approx(30 + 55 + 5)  # the union: the overlap counts once
    assert side.gaps_us == pytest.approx((125 - 10) - 90) and side.before_first_us == 10.0
    assert side.host_overhead_share == pytest.approx(1 - 90 / 150, abs=1e-3)
    assert [k.name for k in side.kernels] == ["cutlass::Kernel2<…>", "my_fused_kernel"]
    gemm, mine = side.kernels
    assert gemm.per_call == 2.0 and gemm.mean_us == 30.0 and not gemm.own and mine.own
    assert gemm.share == pytest.approx(60 / 95, abs=1e-3) and side.own_share == pytest.approx(30 / 95, abs=1e-3)
    assert [(c.kind, c.per_call, c.us_per_call) for c in side.copies] == [("Memcpy DtoD", 1.0, 5.0)]


def test_without_call_marks_the_runs_divide_the_totals_and_without_events_the_digest_is_empty() -> None:
    events = [e for e in _two_calls() if e.kind != "call"]
    side = digest(events, runs=2)
    assert side.calls == 2 and side.launches == 4.0 and side.own_share is None
    empty = digest([], runs=3)
    assert empty.calls == 3 and empty.kernels == [] and empty.device_busy_us == 0.0


def test_template_instances_of_one_kernel_fold_into_one_row_that_says_how_many() -> None:
    add = ELEMENTWISE.replace("launch_clamp_scalar", "add_kernel")
    side = digest(_call(0.0, [("kernel", ELEMENTWISE, 0.0, 4.0), ("kernel", add, 5.0, 6.0)], 20.0), runs=1)
    assert [(k.name, k.per_call, k.variants, k.mean_us) for k in side.kernels] == [
        ("at::native::vectorized_elementwise_kernel<…>", 2.0, 2, 5.0)]


def test_kernel_names_lose_their_templates_and_arguments_but_keep_what_identifies_them() -> None:
    assert compact_name(ELEMENTWISE) == "at::native::vectorized_elementwise_kernel<…>"
    assert compact_name("triton_poi_fused_add_relu_0") == "triton_poi_fused_add_relu_0"
    assert compact_name("Memcpy DtoD (Device -> Device)") == "Memcpy DtoD"
    assert len(compact_name("k" * 500)) == 80


def test_the_digest_of_a_busy_profile_stays_well_under_two_thousand_tokens() -> None:
    events: list[Event] = []
    for call in range(20):
        ops = [("kernel", f"void fused_op_{i}_kernel<float, 4, {'x' * 200}>(float*, int)", i * 3.0, 2.0 + i % 7)
               for i in range(300)]
        ops += [("memcpy", "Memcpy HtoD (Pageable -> Device)", 950.0, 4.0), ("memset", "Memset (Device)", 960.0, 1.0)]
        events += _call(call * 2000.0, ops, 1000.0)
    side = digest(events, runs=20)
    result = ProfileResult(task_id="t", runs=20, candidate=side, reference=side, table_uri="adaexplore://profiles/x")
    text = result.model_dump_json()
    assert len(text) < 6000, len(text)  # ~4 characters a token
    assert side.other_kernels == 292 and len(side.kernels) == 8
    table = full_table("Candidate", events, side)
    assert table.count("\n| ") == 300 + 2 + 2  # every kernel, both copy kinds, the header and its rule


def test_the_runner_wire_form_round_trips_and_anything_malformed_is_dropped() -> None:
    def ev(name: str, device: str, start: float, end: float, us: float = 0.0, note: bool = False) -> SimpleNamespace:
        return SimpleNamespace(name=name, device_type=f"DeviceType.{device}", time_range=SimpleNamespace(
            start=start, end=end), device_time_total=us, is_user_annotation=note)

    prof = SimpleNamespace(events=lambda: [
        ev(CALL_MARK, "CPU", 0.0, 100.0, note=True), ev(CALL_MARK, "CUDA", 5.0, 31.0, 26.0, note=True),
        ev("user_range", "CUDA", 5.0, 31.0, 26.0, note=True), ev("cudaLaunchKernel", "CPU", 1.0, 3.0), ev("aten::add", "CPU", 0.5, 4.0),
        ev("add_kernel", "CUDA", 5.0, 25.0, 20.0), ev("Memset (Device)", "CUDA", 30.0, 31.0, 1.0)])
    wire = collect(prof, detail=True)
    assert wire["kernels"] == [("add_kernel", 20.0), ("Memset (Device)", 1.0)]
    events = parse_events(json.loads(json.dumps(wire["events"])))
    assert [(e.kind, e.name, e.dur_us) for e in events] == [
        ("call", CALL_MARK, 100.0), ("launch", "cudaLaunchKernel", 2.0), ("kernel", "add_kernel", 20.0),
        ("memset", "Memset (Device)", 1.0)]
    assert "events" not in collect(prof, detail=False)
    bad = {"names": ["a"], "rows": [[0, 0, 1.0, 2.0], [9, 0, 1, 1], [0, 5, 1, 1], [0, 0, "x", 1], [0, 0, 1, -1],
                                    [0, 0, float("nan"), 1], [0, 0, 10 ** 400, 1], [0, 0, 1, True], "row",
                                    [0, 0, 1]]}
    assert len(parse_events(bad)) == 1 and parse_events(None) == [] and parse_events({"names": 3}) == []


def test_the_judge_without_a_gpu_answers_that_profiling_needs_one(tmp_path: Path) -> None:
    judge = Judge(Settings(home=tmp_path, device="cpu"))
    try:
        result, table = judge.profile(TaskSpec(task_id="t", name="t", source="x = 1"), "class ModelNew: pass")
    finally:
        judge.close()
    assert not result.available and result.unavailable == NO_GPU and table == ""


# -- through the MCP surface --------------------------------------------------------------------------
SCALE_TASK = """import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return x * 2
def get_inputs():
    return [torch.randn(64)]
def get_init_inputs():
    return []
"""
KERNEL = "import triton\nclass ModelNew:\n    pass\n# fake: verdict=passed speedup=1.5\n"


class ProfilingJudge(FakeJudge):
    """A fake judge that also profiles (a canned digest), to exercise the tool and its resource."""

    def __init__(self) -> None:
        super().__init__(backend="cuda")
        self.profiled: list[tuple[str, str, int]] = []

    def profile(self, task, kernel_source, runs=5, progress=None):
        self.profiled.append((task.task_id, kernel_source, runs))
        side = digest(_two_calls(), runs=2, own=["my_fused_kernel"])
        return ProfileResult(task_id=task.task_id, runs=runs, gpu="fake", candidate=side, reference=side), "# table\n"


@pytest.fixture()
def app(tmp_path: Path):
    app = App(Settings(home=tmp_path / "home", device="cpu"), judge=ProfilingJudge())
    yield app
    app.close()


def _run(app: App, scenario) -> Any:
    async def main():
        async with Client(build_server(app=app), read_timeout_seconds=60) as client:
            return await scenario(client)

    return anyio.run(main)


def test_profile_kernel_by_eval_id_returns_the_digest_and_the_full_table_as_a_resource(app: App) -> None:
    async def scenario(client: Client):
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert "profile_kernel" in tools and tools["profile_kernel"].output_schema
        task = (await client.call_tool("create_task", {"name": "scale", "reference_source": SCALE_TASK}))
        task_id = task.structured_content["task_id"]
        ev = await client.call_tool("evaluate_kernel", {"task_id": task_id, "kernel_source": KERNEL})
        result = await client.call_tool("profile_kernel", {"eval_id": ev.structured_content["eval_id"], "runs": 3})
        assert not result.is_error, result.content
        body = result.structured_content
        table = await client.read_resource(body["table_uri"])
        both = await client.call_tool("profile_kernel", {"eval_id": "ev_x", "task_id": task_id})
        runs = await client.call_tool("profile_kernel", {"task_id": task_id, "kernel_source": KERNEL, "runs": 0})
        unknown = await client.call_tool("profile_kernel", {"eval_id": "ev_nope"})
        return task_id, body, table, both, runs, unknown

    task_id, body, table, both, runs, unknown = _run(app, scenario)
    assert body["available"] and body["candidate"]["kernels"][1]["own"] and body["eval_id"].startswith("ev_")
    assert app.judge.profiled == [(task_id, KERNEL, 3)]
    assert table.contents[0].text == "# table\n"
    assert both.is_error and "not both" in both.content[0].text
    assert runs.is_error and "runs must be" in runs.content[0].text
    assert unknown.is_error and "unknown eval_id" in unknown.content[0].text


def test_profile_kernel_without_a_profiling_judge_says_so_instead_of_failing(tmp_path: Path) -> None:
    app = App(Settings(home=tmp_path / "home", device="cpu"), judge=FakeJudge())
    try:
        async def scenario(client: Client):
            task = await client.call_tool("create_task", {"name": "scale", "reference_source": SCALE_TASK})
            return await client.call_tool("profile_kernel", {"task_id": task.structured_content["task_id"],
                                                             "kernel_source": KERNEL})

        result = _run(app, scenario)
    finally:
        app.close()
    assert not result.is_error and result.structured_content["available"] is False
    assert "cannot profile" in result.structured_content["unavailable"]


# -- the referee's side, with fake runners --------------------------------------------------------------
def _wire_events(*events: tuple[str, str, float, float, float]) -> dict:
    prof = SimpleNamespace(events=lambda: [SimpleNamespace(
        name=n, device_type=f"DeviceType.{d}", time_range=SimpleNamespace(start=s, end=e), device_time_total=e - s)
        for n, d, s, e, _ in events])
    return collect(prof, detail=True)


class _FakeRunner:
    def __init__(self, answers: dict[str, dict]) -> None:
        self.answers, self.ops, self.killed = answers, [], False
        self.alive = True

    def call(self, header, buffers, deadline, max_reply=0):
        self.ops.append(header["op"])
        return self.answers.get(header["op"], {"ok": True}), []

    def kill(self) -> None:
        self.killed = True

    def retire(self) -> None:  # the real one asks the runner to let go first
        self.kill()


def _fake_referee(tmp_path: Path, cand: _FakeRunner) -> SimpleNamespace:
    import torch

    from adaexplore_mcp.judge import wire

    bufs: list = []
    inputs = wire.encode_value([torch.randn(16)], bufs)
    ref_answers = {"make": {"sets": [{"inputs": inputs, "output": None}]}, "release": {"ok": True, "reserved": 0},
                   "profile": _wire_events((CALL_MARK, "CPU", 0, 50, 0), ("elementwise_kernel", "CUDA", 5, 25, 0))}
    ref = SimpleNamespace(init_inputs={"list": []}, init_buffers=[], key=("ref", ()))
    calls: list[str] = []

    def call_ref(r, header, deadline, what, buffers=()):
        calls.append(header["op"])
        return ref_answers.get(header["op"], {"ok": True}), bufs

    return SimpleNamespace(reference=lambda task, deadline: ref, candidate_runner=lambda deadline: cand,
                           kernel_files=lambda key: ([], []), call_ref=call_ref, wait_spares=lambda d: None,
                           home=tmp_path, physical_index=0, gpu_name="fake GPU", account=lambda r, b: None,
                           forget=lambda task: calls.append("forget"), calls=calls)


def test_the_referee_profiles_both_sides_on_one_input_set_and_digests_them(tmp_path: Path) -> None:
    from adaexplore_mcp.judge.referee_profile import profile

    mine = {**_wire_events((CALL_MARK, "CPU", 0, 40, 0), ("my_kernel", "CUDA", 2, 12, 0)), "launched": ["my_kernel"]}
    cand = _FakeRunner({"profile": mine})
    referee = _fake_referee(tmp_path, cand)
    req = {"task": {}, "cand_module": "cand_x", "cand_source": "src", "timeout_s": 30, "runs": 99}
    result = profile(referee, req, lambda f, m: None)
    assert cand.ops == ["load", "build", "profile"] and cand.killed
    assert referee.calls == ["build", "make", "profile", "release", "forget"]  # CUPTI stays in that process
    assert result["runs"] == 20 and result["gpu"] == "fake GPU"
    side = ProfileResult(task_id="t", candidate=result["candidate"], reference=result["reference"])
    assert side.candidate.kernels[0].own and side.candidate.own_share == 1.0 and not side.reference.kernels[0].own
    assert "my_kernel" in result["table"] and "elementwise_kernel" in result["table"]


def test_a_candidate_that_fails_to_import_or_run_is_the_profiles_error(tmp_path: Path) -> None:
    from adaexplore_mcp.judge.referee_profile import profile

    req = {"task": {}, "cand_module": "cand_x", "cand_source": "src", "timeout_s": 30}
    bad_import = _FakeRunner({"load": {"verdict": "compile_error", "error": {
        "exception": "NameError", "message": "name 'tl' is not defined", "source_line": "x = tl.arange(0, 4)",
        "source_lineno": 7}}})
    result = profile(_fake_referee(tmp_path, bad_import), req, lambda f, m: None)
    assert result["error"].startswith("importing the candidate failed: NameError") and "line 7" in result["error"]
    assert bad_import.killed
    crashing = _FakeRunner({"profile": {"internal": "RuntimeError: boom"}})
    result = profile(_fake_referee(tmp_path, crashing), req, lambda f, m: None)
    assert result["error"] == "running the candidate under the profiler failed: RuntimeError: boom"
