"""Every verdict, reached by a real candidate under the CPU interpreter, with actionable detail."""

from __future__ import annotations

import threading

import pytest

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Verdict
from tests.test_judge_cases import (
    AFFINE_TASK, GOOD, HEADER, LINEAR_KERNEL, LINEAR_SMALL, LINEAR_TASK, SOFTMAX_KERNEL, SOFTMAX_TASK,
    candidate, cpu_settings, task,
)

ABS_TASK = AFFINE_TASK.replace("return x * 2 + 1", "return torch.abs(x)").replace(
    "torch.randn(N)", "torch.rand(N) + 0.5")


@pytest.fixture(scope="module")
def judge(shared_judge: Judge) -> Judge:
    return shared_judge  # tests/conftest.py: one judge for the modules that only evaluate


def test_a_correct_triton_candidate_passes_with_its_kernel_and_tolerance_reported(judge: Judge) -> None:
    stages: list[str] = []
    ev = judge.evaluate(task(), GOOD, progress=lambda f, m: stages.append(m))
    assert ev.verdict == Verdict.passed, ev
    assert ev.kernels_launched == ["affine_kernel"]
    assert ev.trials == 3 and ev.tolerance["atol"] == 1e-2
    assert ev.backend == "cpu-interpreter" and ev.speedup is None and ev.timing_unavailable
    assert ev.eval_id == "" and ev.device_index is None
    assert stages[0] == "queued" and "compiling" in stages and "checking trial 1/3" in stages


def test_a_softmax_candidate_passes(judge: Judge) -> None:
    # 16 rows of 1024 (the interpreter took 12 s over 256 rows on two busy cores): one program per row either way
    small = task(SOFTMAX_TASK, small={"rows": 16}, name="softmax")
    assert judge.evaluate(small, SOFTMAX_KERNEL).verdict == Verdict.passed


def test_small_shapes_are_used_and_weights_are_copied_not_reseeded(judge: Judge) -> None:
    reseeding = LINEAR_KERNEL.replace("        self.linear = nn.Linear(fin, fout)",
                                      "        torch.manual_seed(1234)\n        self.linear = nn.Linear(fin, fout)")
    ev = judge.evaluate(task(LINEAR_TASK, LINEAR_SMALL, name="linear"), reseeding)
    assert ev.verdict == Verdict.passed, ev.error
    assert ev.shapes == "small"
    assert any("TF32" in u for u in ev.unconfirmed)
    assert ev.precision.below_fp32 and any("tl.dot" in r for r in ev.precision.reasons)


def test_a_parameter_shaped_differently_from_the_reference_is_a_shape_mismatch(judge: Judge) -> None:
    """Built under the same seed (the KernelBench convention), a wrongly shaped layer is simply wrong."""
    wrong = LINEAR_KERNEL.replace("nn.Linear(fin, fout)", "nn.Linear(fin, fout + 1)")
    ev = judge.evaluate(task(LINEAR_TASK, LINEAR_SMALL, name="linear"), wrong)
    assert ev.verdict == Verdict.mismatch and ev.mismatch.reason == "shape"
    assert "linear.weight" in " ".join(ev.warnings)  # the copied line-up could not line it up either


def test_source_that_does_not_parse_is_a_compile_error_pointing_at_the_line(judge: Judge) -> None:
    ev = judge.evaluate(task(), GOOD + "\ndef broken(:\n    pass\n")
    assert ev.verdict == Verdict.compile_error
    assert ev.error.exception == "SyntaxError" and ev.error.source_line == "def broken(:"


def test_source_without_model_new_is_a_compile_error(judge: Judge) -> None:
    ev = judge.evaluate(task(), GOOD.replace("class ModelNew", "class Other"))
    assert ev.verdict == Verdict.compile_error and "ModelNew" in ev.error.message


def test_a_failing_import_is_a_compile_error_with_the_import_line(judge: Judge) -> None:
    ev = judge.evaluate(task(), "import not_a_module_xyz\n" + GOOD)
    assert ev.verdict == Verdict.compile_error
    assert ev.error.exception == "ModuleNotFoundError"
    assert ev.error.source_line == "import not_a_module_xyz" and ev.error.source_lineno == 1


def test_calling_tl_float32_as_a_function_is_a_compile_error_at_that_line(judge: Judge) -> None:
    bad = GOOD.replace("tl.store(y_ptr + offs, x * 2 + 1, mask=mask)",
                       "tl.store(y_ptr + offs, tl.float32(x) * 2 + 1, mask=mask)")
    ev = judge.evaluate(task(), bad)
    assert ev.verdict == Verdict.compile_error, ev
    assert "tl.float32(x)" in ev.error.source_line
    assert "not callable" in ev.error.message
    assert "candidate.py" in ev.error.excerpt and str(judge.settings.home) not in ev.error.excerpt


def test_an_oversized_source_is_a_compile_error_without_running_anything(judge: Judge) -> None:
    ev = judge.evaluate(task(), GOOD + "#" * judge.settings.max_source_bytes)
    assert ev.verdict == Verdict.compile_error and ev.error.exception == "SourceTooLarge"
    assert ev.duration_s < 1.0


def test_an_exception_in_forward_is_a_runtime_error_with_the_offending_line(judge: Judge) -> None:
    ev = judge.evaluate(task(), candidate("        y = affine(x)\n        return y[x.numel() + 7]"))
    assert ev.verdict == Verdict.runtime_error
    assert ev.error.exception == "IndexError"
    assert ev.error.source_line == "return y[x.numel() + 7]"


def test_sys_exit_in_forward_is_a_runtime_error_not_a_crash(judge: Judge) -> None:
    ev = judge.evaluate(task(), candidate("        import sys\n        sys.exit(3)"))
    assert ev.verdict == Verdict.runtime_error and ev.error.exception == "SystemExit"


def test_wrong_values_are_a_mismatch_saying_where_and_by_how_much(judge: Judge) -> None:
    ev = judge.evaluate(task(), candidate("        return affine(x) + 0.5"))
    assert ev.verdict == Verdict.mismatch
    m = ev.mismatch
    assert m.reason == "values" and m.trial == 0 and m.shape == [512] and m.output_index == 0
    assert m.max_abs_error == pytest.approx(0.5, rel=1e-5) and m.mismatched_fraction == 1.0
    assert m.worst_index is not None and m.got == pytest.approx(m.expected + 0.5, abs=1e-5)


def test_a_wrong_shape_is_a_mismatch_naming_both_specs(judge: Judge) -> None:
    ev = judge.evaluate(task(), candidate("        return affine(x).reshape(2, -1)"))
    assert ev.verdict == Verdict.mismatch and ev.mismatch.reason == "shape"
    assert ev.mismatch.expected_spec == "float32[512] on cpu" and ev.mismatch.got_spec == "float32[2, 256] on cpu"


def test_nan_outputs_are_a_non_finite_mismatch(judge: Judge) -> None:
    ev = judge.evaluate(task(), candidate("        y = affine(x)\n        y[3] = float('nan')\n        return y"))
    assert ev.verdict == Verdict.mismatch and ev.mismatch.reason == "non_finite" and ev.mismatch.worst_index == [3]


def test_a_pure_pytorch_candidate_is_rejected_for_launching_no_triton_kernel(judge: Judge) -> None:
    ev = judge.evaluate(task(), candidate("        return x * 2 + 1"))
    assert ev.verdict == Verdict.rejected and ev.rejected.check == "no_triton_kernel"


def test_a_candidate_that_mutates_its_input_is_rejected(judge: Judge) -> None:
    ev = judge.evaluate(task(), candidate("        affine(x, out=x)\n        return x.clone()"))
    assert ev.verdict == Verdict.rejected and ev.rejected.check == "input_mutated"


def test_an_output_that_aliases_an_input_is_rejected(judge: Judge) -> None:
    ev = judge.evaluate(task(ABS_TASK, name="abs"), candidate("        affine(x)\n        return x"))
    assert ev.verdict == Verdict.rejected and ev.rejected.check == "output_aliases_input"


def test_caching_the_first_output_across_calls_is_caught_by_fresh_inputs(judge: Judge) -> None:
    caching = candidate(
        "        y = affine(x)\n        if self.cached is None:\n            self.cached = y\n        return self.cached.clone()",
        init="        self.cached = None")
    ev = judge.evaluate(task(), caching)
    assert ev.verdict == Verdict.mismatch and ev.mismatch.trial == 1


def test_flipping_tf32_on_is_flagged_and_restored(judge: Judge) -> None:
    flips = candidate("        torch.backends.cuda.matmul.allow_tf32 = True\n        return affine(x)")
    ev = judge.evaluate(task(), flips)
    assert ev.verdict == Verdict.passed
    assert ev.precision.below_fp32
    assert any("changed global precision flags" in r for r in ev.precision.reasons)
    again = judge.evaluate(task(), GOOD)
    assert not again.precision.below_fp32, again.precision


def test_half_precision_casts_are_flagged_below_fp32(judge: Judge) -> None:
    ev = judge.evaluate(task(), candidate("        return affine(x.half().float())"))
    assert ev.verdict == Verdict.passed and ev.precision.below_fp32
    assert any(".half()" in r for r in ev.precision.reasons)


def test_a_degenerate_task_says_so_on_every_result(judge: Judge) -> None:
    ev = judge.evaluate(task(degenerate=True, name="deg"), GOOD)
    assert ev.degenerate_task and any("degenerate" in w for w in ev.warnings)


def test_concurrent_evaluations_share_the_worker_and_all_finish(judge: Judge) -> None:
    results: list[Verdict] = []
    threads = [threading.Thread(target=lambda: results.append(judge.evaluate(task(), GOOD).verdict)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert results == [Verdict.passed] * 3


def test_the_timeout_argument_overrides_the_default_but_is_capped(judge: Judge) -> None:
    limits = judge.settings.limits
    assert judge._timeout(None) == limits.timeout_s_cpu
    assert judge._timeout(7) == 7
    assert judge._timeout(10**6) == limits.max_timeout_s


def test_header_constant_is_shared_by_candidates() -> None:
    assert GOOD.startswith(HEADER)


def test_a_loop_over_a_runtime_bound_passes_or_is_marked_for_gpu_confirmation(judge: Judge) -> None:
    # Triton 3.9's interpreter runs this; 3.6's (with numpy >= 2.5) fails inside itself on range(0, K, BK),
    # which must then not be presented as a settled compile error.
    runtime_k = LINEAR_KERNEL.replace("K: tl.constexpr,", "K,")
    ev = judge.evaluate(task(LINEAR_TASK, LINEAR_SMALL, name="linear"), runtime_k)
    assert ev.verdict == Verdict.passed or (
        ev.verdict == Verdict.compile_error and any("inside Triton's interpreter" in u for u in ev.unconfirmed)), ev


def test_a_reference_out_of_memory_is_the_references_failure_and_on_the_cpu_not_retried(
        judge: Judge) -> None:
    """On the H200, 5 of 30 large tasks failed because the reference's own forward ran out of memory while
    other judge processes held the rest; such a failure is retried once on a fresh referee when the referee
    sees the device short of memory (Referee.memory_short, tests/test_judge_isolation.py). On the CPU it never
    is: the runner's word alone recycled the worker (red team, round 4)."""
    oom_task = AFFINE_TASK.replace("        return x * 2 + 1",
                                   "        raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 6.00 GiB')")
    stages: list[str] = []
    ev = judge.evaluate(task(oom_task, name="oom-reference"), GOOD, progress=lambda f, m: stages.append(m))
    assert ev.verdict == Verdict.runtime_error and ev.error.exception == "ReferenceFailure", ev.error
    assert not any("retrying on a fresh judge process" in m for m in stages), stages
    assert not any("fresh judge process" in w for w in ev.warnings), ev.warnings
    assert "out of memory" in ev.error.message.lower()
    assert judge.evaluate(task(), GOOD).verdict == Verdict.passed  # the judge carries on


# slow: a diagnostic (ADAEXPLORE_TRACE_OPS) on a judge of its own per mode, 14 s each
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["1", "profile"])
def test_tracing_ops_tells_round_trips_from_time_inside_the_runners(
        tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """Latency work needs to know whether a request's time is spent in the runner or on the way, which
    modules each request imported (a fresh runner pays for every one), and with "profile" where inside."""
    from adaexplore_mcp.judge.processes.runners import OP_TRACE_ENV

    monkeypatch.setenv(OP_TRACE_ENV, mode)
    traced = Judge(cpu_settings(tmp_path_factory.mktemp("traced")))
    try:
        ev = traced.evaluate(task(), GOOD)
    finally:
        traced.close()
    assert ev.verdict == Verdict.passed, ev
    ops = {k: v for k, v in (ev.ops_ms or {}).items() if " " not in k}
    assert "cand.forward" in ops and "ref.make" in ops and "cand.replay" in ops
    for op, (calls, round_trip, inside) in ops.items():
        assert calls >= 1 and 0 <= inside <= round_trip, op
    assert ops["cand.forward"][2] > 0
    imports = [k for k in ev.ops_ms or {} if k.startswith("imports cand.load ")]
    assert imports and "cand_" in imports[0]  # the candidate's own module, imported by its load
    profiled = [k for k in ev.ops_ms or {} if k.startswith("prof cand.forward ")]
    assert bool(profiled) == (mode == "profile")
    assert all(calls >= 1 and cum >= own >= 0 for k in profiled for calls, cum, own in [ev.ops_ms[k]])
