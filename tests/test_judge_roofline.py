"""The roofline on the CPU: byte and FLOP accounting on small modules, the peak table, the physical floor
(`faster_than_hardware`), and how a timed result records it all (referee_timing._record and
referee_baselines with a fake evaluation; the GPU paths themselves are in test_judge_gpu.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from adaexplore_mcp.config import JudgeLimits
from adaexplore_mcp.judge import referee_baselines, referee_timing, roofline
from adaexplore_mcp.judge.checks.roofline import check_faster_than_hardware
from adaexplore_mcp.judge.reference_timings import ReferenceTiming, ReferenceTimings
from adaexplore_mcp.judge.evaluation import Outcome
from adaexplore_mcp.judge.referee import ReferenceFailure
from adaexplore_mcp.models import Evaluation, TaskCost, Timing, Verdict
from adaexplore_mcp.tasks.format import import_file

H100 = "NVIDIA H100 80GB HBM3"


class Scale(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def test_a_linear_layer_counts_inputs_outputs_parameters_and_its_matmul_flops() -> None:
    model, x = torch.nn.Linear(64, 32), torch.randn(8, 64)
    cost = roofline.count_cost(model, [x])
    assert (cost.input_bytes, cost.output_bytes, cost.param_bytes) == (8 * 64 * 4, 8 * 32 * 4, (64 * 32 + 32) * 4)
    assert cost.min_bytes == cost.input_bytes + cost.output_bytes + cost.param_bytes
    assert cost.flops == 2 * 8 * 64 * 32


def test_elementwise_work_counts_no_flops_and_tuple_outputs_count_each_tensor() -> None:
    class Two(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x), x.sum(dim=1)

    cost = roofline.count_cost(Two(), [torch.randn(16, 8)])
    assert cost.flops == 0 and cost.param_bytes == 0
    assert cost.output_bytes == (16 * 8 + 16) * 4


def test_shared_storage_counts_once_and_an_expanded_tensor_counts_the_memory_it_spans() -> None:
    x = torch.randn(32, 32)
    assert roofline.unique_bytes([x, x]) == x.numel() * 4
    assert roofline.unique_bytes([x[:, :4], x]) == x.numel() * 4  # views of one storage: the largest counts
    row = torch.randn(1, 32)
    assert roofline.unique_bytes([row.expand(1000, 32)]) == 32 * 4
    assert roofline.unique_bytes([torch.empty(0), 3, None]) == 0
    with torch.device("meta"):
        a, b = torch.empty(10, 10), torch.empty(10, 10)
    assert roofline.unique_bytes([a, b, a]) == 2 * 400  # meta tensors: told apart by their base


TASK = """
import torch
N = 4096
class Model(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = torch.nn.Linear(d, d)
    def forward(self, x):
        return torch.relu(self.lin(x)){extra}
def get_inputs():
    return [torch.randn(N, 16)]
def get_init_inputs():
    return [16]
"""


def _task(tmp_path: Path, extra: str = "", name: str = "ref_roof") -> tuple[object, Path]:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(TASK.format(extra=extra)))
    return import_file(name, path), path


def test_a_task_is_counted_at_full_size_on_the_meta_device_even_when_the_runner_holds_small_shapes(
        tmp_path: Path) -> None:
    module, path = _task(tmp_path)
    module.N = 8  # what apply_shapes does for small_shapes
    reply = roofline.count_task(module, path, [16], "cpu", small=True)
    cost = TaskCost.model_validate(reply["cost"])
    assert "meta" in cost.note
    assert cost.input_bytes == 4096 * 16 * 4 and cost.output_bytes == 4096 * 16 * 4
    assert cost.flops == 2 * 4096 * 16 * 16


def test_without_meta_kernels_a_task_is_counted_on_real_inputs_at_full_size_only(tmp_path: Path) -> None:
    module, path = _task(tmp_path, extra=" * float(x.abs().max().item() > -1)", name="ref_roof_item")
    reply = roofline.count_task(module, path, [16], "cpu", small=False)
    cost = TaskCost.model_validate(reply["cost"])
    assert "real input set" in cost.note and cost.flops == 2 * 4096 * 16 * 16
    small = roofline.count_task(module, path, [16], "cpu", small=True)
    assert "cost" not in small and "small shapes" in small["cost_unavailable"]


@pytest.mark.parametrize("name, expected", [
    (H100, "H100 SXM"), ("NVIDIA H100 PCIe", "H100 PCIe"), ("NVIDIA H100 NVL", "H100 NVL"),
    ("NVIDIA H200", "H200 SXM"), ("NVIDIA H200 NVL", "H200 NVL"), ("NVIDIA B200", "B200 (HGX, per GPU)"),
    ("NVIDIA A100-SXM4-40GB", "A100 40GB"), ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"),
    ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"), ("NVIDIA A100-PCIE-40GB", "A100 40GB"),
    ("NVIDIA L40S", "L40S"), ("NVIDIA L40", "L40"), ("NVIDIA L4", "L4"), ("NVIDIA A10", "A10"),
    ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090"), ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada"),
    ("NVIDIA RTX A6000", "RTX A6000"),
])
def test_the_peak_table_knows_common_gpus_by_the_name_torch_reports(name: str, expected: str) -> None:
    peak = roofline.lookup_peak(name)
    assert peak is not None and peak.name == expected
    assert peak.gbps > 0 and peak.fp32 and peak.tf32 and peak.bf16 and peak.bf16 >= peak.tf32 >= peak.fp32 * 0.99


@pytest.mark.parametrize("name", ["NVIDIA A10G", "NVIDIA GH200 480GB", "Tesla V100-SXM2-16GB", "", None])
def test_an_unknown_gpu_has_no_datasheet_peak_and_falls_back_to_a_measured_bandwidth(name: str | None) -> None:
    assert roofline.lookup_peak(name) is None
    peak = roofline.measured_peak(name, 1234.0)
    assert peak.gbps == 1234.0 and peak.fp32 is None and "measured" in peak.source


def test_the_flop_peak_follows_the_task_precision_and_tf32_use() -> None:
    assert roofline.flops_basis("float32", False) == "fp32"
    assert roofline.flops_basis("float32", True) == "tf32"
    assert roofline.flops_basis("bfloat16", False) == roofline.flops_basis("float16", True) == "bf16"


def _cost(min_bytes: int = 1 << 30, flops: int | None = 0) -> TaskCost:
    return TaskCost(min_bytes=min_bytes, input_bytes=min_bytes // 2, output_bytes=min_bytes // 2, flops=flops)


def test_a_memory_bound_kernel_reports_its_share_of_peak_bandwidth() -> None:
    peak = roofline.lookup_peak(H100)
    floor = roofline.lower_bound_ms(1 << 30, peak.gbps)
    assert floor == pytest.approx((1 << 30) / 3350e9 * 1e3)
    roof, impossible = roofline.assess(_cost(), 2 * floor, [10 * floor], peak, "fp32")
    assert impossible is None and roof.bound == "memory" and roof.bound_checked
    assert roof.pct_peak_bandwidth == pytest.approx(50.0, abs=0.1) and roof.pct_roofline == pytest.approx(50.0, abs=0.1)
    assert roof.achieved_tflops == 0.0 and roof.pct_peak_flops == 0.0 and "H100 SXM" in roof.peak_source


def test_a_matmul_heavy_task_is_compute_bound_against_the_peak_of_its_precision() -> None:
    peak = roofline.lookup_peak(H100)
    flops = 2 * 8192 ** 3
    cost = _cost(min_bytes=3 * 8192 * 8192 * 4, flops=flops)
    tf32_ms = flops / (peak.tf32 * 1e12) * 1e3
    roof, impossible = roofline.assess(cost, 4 * tf32_ms, [100.0], peak, "tf32")
    assert impossible is None and roof.bound == "compute" and roof.peak_tflops == peak.tf32
    assert roof.pct_peak_flops == pytest.approx(25.0, abs=0.1) and roof.pct_roofline == pytest.approx(25.0, abs=0.1)


def test_a_time_under_the_physical_floor_is_impossible_unless_the_reference_itself_beats_the_floor() -> None:
    peak = roofline.lookup_peak(H100)
    floor = roofline.lower_bound_ms(1 << 30, peak.gbps)
    _, impossible = roofline.assess(_cost(), 0.5 * floor, [3 * floor], peak, "fp32")
    assert impossible is not None and "cannot be that fast" in impossible
    _, ok = roofline.assess(_cost(), 0.85 * floor, [3 * floor], peak, "fp32")
    assert ok is None  # within the margin: measurement noise, or a better datasheet than ours
    roof, unchecked = roofline.assess(_cost(), 0.1 * floor, [3 * floor, 0.2 * floor], peak, "fp32")
    assert unchecked is None and not roof.bound_checked and "not applied" in (roof.note or "")


# -- how a timed result records it (referee_timing._record, no GPU) -----------------------------------
def _fake_ev(gpu: str | None = H100, cost: dict | None = None) -> SimpleNamespace:
    referee = SimpleNamespace(gpu_name=gpu)
    return SimpleNamespace(out=Outcome(), limits=JudgeLimits(), referee=referee, ref=SimpleNamespace(key=("m", ())),
                           req={"task": {"cost": cost} if cost else {}}, deadline=0.0)


def _blocks(ms: float) -> list:
    return [([ms] * 10, ms * 10, 10), ([ms] * 20, ms * 20, 20)]


def _record(ev: SimpleNamespace, cand_ms: float, ref_ms: float, compiled: dict, cost: TaskCost | str) -> Evaluation:
    hardware = {"cost": cost, "peak": roofline.lookup_peak(ev.referee.gpu_name), "clocks": {"sm_mhz": 1980}}
    timings, used = ReferenceTimings(), ReferenceTiming(strict=_blocks(ref_ms), tf32=_blocks(ref_ms / 2),
                                                        compiled=compiled)
    timings.add(used)
    referee_timing._record(ev, _blocks(cand_ms), timings, used, 10, 4, hardware, reused=False)
    check_faster_than_hardware(ev)  # the pipeline's next check (checks/pipeline.py)
    return Evaluation(task_id="t", backend="cuda", **ev.out.as_dict())


def test_a_timed_result_carries_the_compiled_speedup_the_roofline_and_the_compile_cost() -> None:
    ev = _fake_ev()
    cost = _cost(min_bytes=1 << 20)
    result = _record(ev, 0.1, 0.4, {"blocks": _blocks(0.2), "compile_s": 12.5}, cost)
    assert result.verdict == Verdict.passed and result.speedup == pytest.approx(4.0)
    timing = result.timing
    assert isinstance(timing, Timing) and timing.speedup_compile == pytest.approx(2.0)
    assert timing.reference_compiled.median_ms == pytest.approx(0.2) and timing.compile_mode == "default"
    assert timing.compile_s == 12.5 and timing.compile_unavailable is None
    assert timing.roofline is not None and timing.roofline.bound == "memory" and timing.roofline.min_bytes == 1 << 20
    assert "torch.compile" in timing.method and timing.clocks.sm_mhz == 1980


def test_without_a_compiled_reference_the_result_says_why_and_the_rest_carries_on() -> None:
    ev = _fake_ev()
    result = _record(ev, 0.1, 0.4, {"unavailable": "torch.compile failed: BackendCompilerFailed: no"},
                     "the reference's bytes were not counted")
    assert result.verdict == Verdict.passed and result.speedup == pytest.approx(4.0)
    assert result.timing.speedup_compile is None and result.timing.reference_compiled is None
    assert result.timing.compile_unavailable.startswith("torch.compile failed")
    assert result.timing.roofline is None and result.timing.roofline_unavailable


def test_a_candidate_faster_than_the_hardware_allows_is_rejected_without_a_speedup() -> None:
    ev = _fake_ev()
    cost = _cost(min_bytes=1 << 32)  # 4 GiB: 1.28 ms at 3.35 TB/s
    result = _record(ev, 0.05, 5.0, {}, cost)
    assert result.verdict == Verdict.rejected and result.rejected.check == "faster_than_hardware"
    assert result.speedup is None and result.timing is not None and result.timing.roofline.bound_checked


def test_the_task_cost_comes_from_the_task_or_from_the_reference_runner_and_failures_are_reasons() -> None:
    carried = _fake_ev(cost=_cost().model_dump())
    assert isinstance(referee_baselines.task_cost(carried), TaskCost)

    def call_ref(ref, header, deadline, what, buffers=()):
        assert header == {"op": "cost"}
        return reply, []

    asked = _fake_ev()
    asked.referee.call_ref = call_ref
    reply = {"cost_unavailable": "counting failed: RuntimeError: x"}
    assert referee_baselines.task_cost(asked) == "counting failed: RuntimeError: x"
    reply = {"cost": {"min_bytes": "lots"}}
    assert "malformed" in referee_baselines.task_cost(asked)
    reply = {"cost": _cost(min_bytes=0).model_dump()}
    assert "no bytes" in referee_baselines.task_cost(asked)


def test_a_failed_compile_is_remembered_per_task_and_not_retried() -> None:
    ev = _fake_ev()
    ev.ref = SimpleNamespace(key=("failing_compile", ()))
    calls: list[dict] = []

    def call_ref(ref, header, deadline, what, buffers=()):
        calls.append(header)
        return {"ready": False, "compile_error": "BackendCompilerFailed: boom"}, []

    ev.referee.call_ref = call_ref
    compiled: dict = {}
    assert not referee_baselines.compile_ready(ev, compiled) and "boom" in compiled["unavailable"]
    again: dict = {}
    assert not referee_baselines.compile_ready(ev, again) and again["unavailable"] == compiled["unavailable"]
    assert len(calls) == 1


def test_no_compile_is_started_without_the_time_to_finish_it_and_an_overrun_is_reported(monkeypatch) -> None:
    import time

    ev = _fake_ev()
    ev.ref = SimpleNamespace(key=("slow_compile", ()))
    ev.mark = lambda stage: None
    ev.ref.runner = SimpleNamespace(alive=True)
    ev.deadline = time.monotonic() + 5
    compiled: dict = {}
    referee_baselines.compile_and_time(ev, None, [], 1, compiled)
    assert "a later evaluation will" in compiled["unavailable"]

    def call_ref(ref, header, deadline, what, buffers=()):
        raise ReferenceFailure("compiling the reference with torch.compile did not finish within the time limit")

    ev.referee.call_ref = call_ref
    ev.deadline = time.monotonic() + 300
    compiled = {}
    referee_baselines.compile_and_time(ev, None, [], 1, compiled)
    assert compiled["unavailable"].startswith("torch.compile failed") and ev.ref.key in referee_baselines._compile_failed


# slow: a judge of its own for one probe, 23 s; counting at full size:
# test_a_task_is_counted_at_full_size_on_the_meta_device_even_when_the_runner_holds_small_shapes
@pytest.mark.slow
def test_a_probe_counts_the_task_at_full_size_in_the_reference_runner(tmp_path: Path) -> None:
    from adaexplore_mcp.judge import Judge
    from tests.test_judge_cases import LINEAR_SMALL, LINEAR_TASK, cpu_settings, task

    with Judge(cpu_settings(tmp_path)) as judge:
        probe = judge.probe_task(task(LINEAR_TASK, small=LINEAR_SMALL, name="linear"))
    assert probe.ok, probe.error
    assert probe.cost is not None, probe.cost_unavailable
    assert probe.cost.flops == 2 * 2048 ** 3 and probe.cost.min_bytes == (3 * 2048 * 2048 + 2048) * 4


class _FakeSides:
    """referee_timing's _Sides as the baselines use it: lend, time a block of the reference, release."""

    def __init__(self, ev: SimpleNamespace, fail: bool = False) -> None:
        self.ev, self.fail, self.released, self.headers = ev, fail, [], []

    def inputs_only(self, seeds, key):
        return [[torch.zeros(4)] for _ in seeds]

    def time_ref(self, sets, calls, **extra):
        header = {"sets": len(sets), "calls": calls, **extra}
        self.headers.append(header)
        if self.fail:
            raise ReferenceFailure("the reference's forward (timed) raised RuntimeError: compiled graph broke")
        return [0.2] * header["calls"], 0.2 * header["calls"], []

    def release_ref(self, only=None):
        self.released.append(only)

    def release_early(self, only=None, cand=False, ref=True):
        self.released.append(f"early:{only}")


def test_a_compile_is_paid_once_then_timed_in_blocks_of_the_compiled_variant(tmp_path: Path) -> None:
    import time

    ev = _fake_ev()
    ev.ref = SimpleNamespace(key=("compiles", ()), runner=SimpleNamespace(alive=True))
    ev.referee.home, ev.referee.physical_index = tmp_path, 0
    ev.referee.call_ref = lambda ref, header, deadline, what, buffers=(): ({"ready": True, "compile_s": 3.0}, [])
    ev.mark = lambda stage: None
    ev.deadline = time.monotonic() + 300
    sides, compiled = _FakeSides(ev), {}
    referee_baselines.compile_and_time(ev, sides, [1, 2, 3], 5, compiled)
    assert compiled["compile_s"] >= 0 and [n for _, _, n in compiled["blocks"]] == [5, 10]
    assert all(h["variant"] == "compiled" for h in sides.headers) and "early:timed" in sides.released
    assert sides.released[-1] is None  # everything the reference kept goes at the end
    timing: dict = {}
    assert referee_baselines.compiled_median(ev, compiled, timing) == pytest.approx(0.2)
    assert timing["reference_compiled"]["reps"] == 15

    broken, failed = _FakeSides(ev, fail=True), {}
    assert referee_baselines.time_compiled(ev, broken, [[]], 5, failed) == []
    assert "compiled graph broke" in failed["unavailable"]


def test_a_reference_process_lost_before_the_compile_check_is_not_held_against_the_task() -> None:
    ev = _fake_ev()
    ev.ref = SimpleNamespace(key=("lost", ()), runner=SimpleNamespace(alive=False))

    def call_ref(ref, header, deadline, what, buffers=()):
        raise ReferenceFailure("asking for the compiled reference: the process was killed by SIGKILL")

    ev.referee.call_ref = call_ref
    compiled: dict = {}
    assert not referee_baselines.compile_ready(ev, compiled) and "later evaluation" in compiled["unavailable"]
    assert ev.ref.key not in referee_baselines._compile_failed
    gone: dict = {}
    referee_baselines.compile_and_time(ev, None, [], 1, gone)
    assert "gone" in gone["unavailable"] and ev.ref.key not in referee_baselines._compile_failed


def test_a_compile_that_overran_an_evaluations_deadline_is_retried_only_with_more_time(monkeypatch) -> None:
    clock = {"now": 0.0}

    def monotonic() -> float:
        clock["now"] += 50.0  # each reading: a long compile later
        return clock["now"]

    monkeypatch.setattr(referee_baselines, "time", SimpleNamespace(monotonic=monotonic))
    ev = _fake_ev()
    ev.ref = SimpleNamespace(key=("overruns", ()), runner=SimpleNamespace(alive=True))
    ev.mark = lambda stage: None
    tries: list[float] = []

    def call_ref(ref, header, deadline, what, buffers=()):
        tries.append(deadline)
        raise ReferenceFailure("compiling the reference with torch.compile did not finish within the time limit")

    ev.referee.call_ref = call_ref
    ev.deadline, first = 50.0 + 22.0, {}  # 20 s left after the 2 s reserve
    referee_baselines.compile_and_time(ev, None, [], 1, first)
    assert "larger timeout_s will try again" in first["unavailable"] and len(tries) == 1
    ev.deadline, again = clock["now"] + 50.0 + 22.0, {}
    referee_baselines.compile_and_time(ev, None, [], 1, again)
    assert "needed more than the 20 s" in again["unavailable"] and len(tries) == 1
    ev.deadline, longer = clock["now"] + 50.0 + 62.0, {}
    referee_baselines.compile_and_time(ev, None, [], 1, longer)
    assert len(tries) == 2  # more time: tried again (and, failing well before its limit, it is now a failure)
    assert referee_baselines._compile_failed[ev.ref.key].startswith("torch.compile failed")
