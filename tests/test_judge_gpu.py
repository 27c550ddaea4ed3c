"""The judge on a real GPU: timing, TF32 flags, fatal CUDA errors, stability, latency. Not run in CI."""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

import pytest

from adaexplore_mcp.config import Settings
from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Verdict
from tests.test_judge_cases import AFFINE_TASK, GOOD, LINEAR_KERNEL, LINEAR_TASK, candidate, task

pytestmark = pytest.mark.gpu

BIG_AFFINE = AFFINE_TASK.replace("N = 512", "N = 1 << 24")
BIG = {"source": BIG_AFFINE, "name": "affine_big"}


def why(ev: object) -> str:
    """What a failed assertion shows: the verdict and its reasons in full (pytest cuts a long object's repr short,
    not a string)."""
    return json.dumps({"verdict": ev.verdict.value, "error": ev.error and ev.error.model_dump(exclude_none=True),
                       "rejected": ev.rejected and ev.rejected.model_dump(), "warnings": ev.warnings,
                       "sandbox": ev.sandbox, "stages_ms": ev.stages_ms}, indent=1, default=str)


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    j = Judge(Settings(home=tmp_path_factory.mktemp("judge"), device="cuda"), device_indices=[0])
    j.start(wait=True)
    yield j
    j.close()
    notes = os.environ.get("GPU_TEST_NOTES")  # bench/gpu_run.sh: the workers' own notes (references dropped, why)
    if notes:
        from adaexplore_mcp.judge.notes import read_notes

        Path(notes).write_text("\n".join(read_notes(j.settings.home / "logs")) + "\n")


def test_a_correct_candidate_passes_with_interleaved_timing_and_speedups(judge: Judge) -> None:
    ev = judge.evaluate(task(**BIG), GOOD)
    assert ev.verdict == Verdict.passed, why(ev)
    assert ev.backend == "cuda" and ev.shapes == "full" and ev.device_index == 0
    assert ev.timing is not None and ev.timing.gpu and ev.timing.reference_tf32 is not None
    assert ev.speedup is not None and ev.speedup > 0 and ev.speedup_tf32 is not None
    assert ev.timing.candidate.reps >= judge.settings.limits.min_reps
    assert (judge.settings.home / "locks" / "gpu0.lock").exists()


def test_a_default_precision_tl_dot_is_flagged_and_an_ieee_one_is_not(judge: Judge) -> None:
    linear = task(LINEAR_TASK, name="linear")
    tf32 = judge.evaluate(linear, LINEAR_KERNEL)
    assert tf32.verdict == Verdict.passed, why(tf32)
    assert tf32.precision.below_fp32 and tf32.speedup_tf32 is not None
    ieee = judge.evaluate(linear, LINEAR_KERNEL.replace("tl.dot(a, w)", "tl.dot(a, w, input_precision='ieee')"))
    assert ieee.verdict == Verdict.passed and not ieee.precision.below_fp32, ieee.precision
    assert not tf32.unconfirmed and not ieee.unconfirmed


def test_a_triton_compile_error_on_the_gpu_points_at_the_candidate_line(judge: Judge) -> None:
    bad = GOOD.replace("tl.store(y_ptr + offs, x * 2 + 1, mask=mask)",
                       "tl.store(y_ptr + offs, tl.float32(x) * 2 + 1, mask=mask)")
    ev = judge.evaluate(task(), bad)
    assert ev.verdict == Verdict.compile_error, why(ev)
    assert ev.error.source_line is not None and "tl.float32(x)" in ev.error.source_line, ev.error


def test_an_illegal_memory_access_is_crashed_and_the_next_evaluation_passes(judge: Judge) -> None:
    oob = candidate("        y = torch.empty_like(x)\n        oob_kernel[(1,)](x, y, 1 << 40, BLOCK=128)\n        return y",
                    extra='''
@triton.jit
def oob_kernel(x_ptr, y_ptr, shift, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs + shift, tl.load(x_ptr + offs))
''')
    ev = judge.evaluate(task(), oob)
    assert ev.verdict == Verdict.crashed, why(ev)
    again = judge.evaluate(task(), GOOD)
    assert again.verdict == Verdict.passed, why(again)


def test_a_candidate_that_goes_wrong_only_when_timed_is_rejected(judge: Judge) -> None:
    sneaky = candidate(
        "        self.calls += 1\n        y = affine(x)\n        return y if self.calls <= 5 else y * 0",
        init="        self.calls = 0")
    ev = judge.evaluate(task(**BIG), sneaky)
    assert ev.verdict == Verdict.rejected and ev.rejected.check == "timed_output_mismatch", why(ev)


def test_timing_the_same_candidate_five_times_is_stable_within_three_percent(judge: Judge) -> None:
    speedups = [judge.evaluate(task(**BIG), GOOD).speedup for _ in range(5)]
    assert all(s is not None for s in speedups)
    spread = max(speedups) / min(speedups) - 1
    assert spread <= 0.03, speedups


def test_warm_evaluation_latency_is_under_a_second_and_a_half(judge: Judge) -> None:
    judge.evaluate(task(**BIG), GOOD)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        ev = judge.evaluate(task(**BIG), GOOD)
        assert ev.verdict == Verdict.passed, why(ev)
        times.append(time.perf_counter() - t0)
    assert statistics.median(times) <= 1.5, times


def test_work_left_on_a_side_stream_is_counted_and_flagged(judge: Judge) -> None:
    side = candidate(
        "        s = torch.cuda.Stream()\n        with torch.cuda.stream(s):\n"
        "            for _ in range(20):\n                y = affine(x)\n        return y")
    ev = judge.evaluate(task(**BIG), side)
    assert ev.verdict == Verdict.passed, why(ev)
    assert any("missed about" in w for w in ev.warnings), (ev.warnings, ev.timing)
    honest = judge.evaluate(task(**BIG), GOOD)
    assert not any("missed about" in w for w in honest.warnings), honest.warnings


# -- issue 11: torch.compile baseline, roofline, profile digest -----------------------------------------
def test_a_timed_result_carries_the_compiled_reference_and_the_roofline(judge: Judge) -> None:
    evs = [judge.evaluate(task(**BIG), GOOD) for _ in range(3)]
    for ev in evs:
        assert ev.verdict == Verdict.passed, why(ev)
        assert ev.timing.compile_mode == "default"
        assert ev.timing.speedup_compile is not None or ev.timing.compile_unavailable, ev.timing
    # compiled once per reference process: at most one evaluation per worker pays for it
    assert sum(ev.timing.compile_s is not None for ev in evs) <= judge.settings.workers_per_gpu
    compiled = [ev for ev in evs if ev.timing.speedup_compile is not None]
    assert compiled, [ev.timing.compile_unavailable for ev in evs]
    assert compiled[-1].timing.reference_compiled.median_ms > 0
    roof = evs[-1].timing.roofline
    assert roof is not None, evs[-1].timing.roofline_unavailable
    assert roof.min_bytes == 2 * (1 << 24) * 4 and roof.flops == 0 and roof.bound == "memory"
    assert 0 < roof.pct_peak_bandwidth < 125 and roof.bound_checked, roof
    clocks = evs[-1].timing.clocks
    assert clocks is None or clocks.sm_mhz is None or clocks.sm_mhz > 100


def test_a_matmul_task_counts_its_flops_and_is_held_to_the_tf32_peak(judge: Judge) -> None:
    ev = judge.evaluate(task(LINEAR_TASK, name="linear"), LINEAR_KERNEL)
    assert ev.verdict == Verdict.passed, why(ev)
    roof = ev.timing.roofline
    assert roof is not None and roof.flops == 2 * 2048 ** 3 and roof.peak_basis == "tf32", roof
    assert roof.min_bytes == (3 * 2048 * 2048 + 2048) * 4 and roof.achieved_tflops > 0


def test_profile_kernel_digests_both_sides_and_marks_the_candidates_own_kernel(judge: Judge) -> None:
    result, table = judge.profile(task(**BIG), GOOD, runs=3)
    assert result.available and result.error is None, result
    cand, ref = result.candidate, result.reference
    assert cand.calls == 3 and ref.calls == 3 and cand.kernels and ref.kernels
    assert any(k.own and "affine_kernel" in k.name for k in cand.kernels), cand.kernels
    assert cand.own_share and cand.own_share > 0.5 and not any(k.own for k in ref.kernels)
    assert cand.wall_us >= cand.device_busy_us > 0
    assert "affine_kernel" in table and "Reference" in table
    assert len(result.model_dump_json()) < 8000


def test_profile_kernel_reports_a_candidate_that_fails_instead_of_failing(judge: Judge) -> None:
    broken = candidate("        raise RuntimeError('nope')")
    result, table = judge.profile(task(**BIG), broken, runs=2)
    assert result.error and "nope" in result.error and table == ""


def test_the_runners_seeding_leaves_the_cuda_states_torch_manual_seed_leaves() -> None:
    """On a GPU the runners seed the CUDA generators themselves too (judge/seeding.py): the same draws."""
    import torch

    from adaexplore_mcp.judge import seeding

    torch.zeros(1, device="cuda")  # as in every runner: CUDA is up before anything is seeded
    for seed in (0, 2**62 + 7):
        torch.manual_seed(seed)
        expected = (torch.randn(64, device="cuda"), torch.randn(8))
        torch.manual_seed(seed + 1)
        seeding.manual_seed(seed)
        got = (torch.randn(64, device="cuda"), torch.randn(8))
        assert all(torch.equal(a, b) for a, b in zip(expected, got))


def test_the_replay_is_judged_before_the_timing_and_a_rejected_candidate_is_not_timed(judge: Judge) -> None:
    """The replay runs beside the last trials (replay/referee_side.py): its stages come before the timing's, and a
    token kernel next to PyTorch is rejected without being timed (no timing, no speedup)."""
    from tests.redteam.conftest import TOKEN_KERNELS

    ev = judge.evaluate(task(**BIG), GOOD)
    assert ev.verdict == Verdict.passed, why(ev)
    stages = list(ev.stages_ms)
    assert stages.index("replay_wait") < stages.index("timing_candidate"), ev.stages_ms
    assert ev.work and ev.work["replay"]["launches"] >= 1
    token = candidate("        token(x)\n        return x * 2 + 1", extra=TOKEN_KERNELS)
    ev = judge.evaluate(task(**BIG), token)
    assert ev.verdict == Verdict.rejected and ev.rejected.check == "work_not_in_candidate_kernels", why(ev)
    assert ev.timing is None and ev.speedup is None and "timing_candidate" not in ev.stages_ms


def test_a_kernel_body_that_reaches_python_at_compile_time_is_refused_by_the_replay(judge: Judge) -> None:
    """Triton's code generator calls what a kernel body reaches (`tl.core.builtins.exec`); in the replay that
    code would forge the runs that decide the verdict (red team, round 16). The candidate's own runner may run
    it (its own process). Each candidate here empties its own Triton cache, so the replay compiles its kernels
    itself (else it loads what the candidate's runner compiled): the guard refuses the escape and lets an honest
    kernel through, on this host's Triton."""
    from tests.redteam.conftest import TOKEN_KERNELS

    forget = "        import os, shutil; shutil.rmtree(os.environ['TRITON_CACHE_DIR'], ignore_errors=True)\n"
    payload = ("import adaexplore_mcp.judge.replay.run as R; R.Run.execute = (lambda run, *a, _e=R.Run.execute: "
               "_e(run, *a) * 0 + 12345 if run.mode != 'full' else _e(run, *a))")
    extra = TOKEN_KERNELS + f'''

@triton.jit
def escape_kernel(x_ptr):
    tl.core.builtins.exec({payload!r})
    tl.store(x_ptr, tl.load(x_ptr))
'''
    forged = candidate(f"        escape_kernel[(1,)](x)\n{forget}        return x * 2 + 1", extra=extra)
    ev = judge.evaluate(task(**BIG), forged)
    assert ev.verdict == Verdict.rejected and ev.rejected.check == "work_not_replayable", why(ev)
    assert "outside Triton's language" in ev.rejected.message, why(ev)
    honest = candidate(f"        y = affine(x)\n{forget}        return y")
    assert judge.evaluate(task(**BIG), honest).verdict == Verdict.passed
