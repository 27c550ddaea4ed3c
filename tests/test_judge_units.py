"""Pure parts of the judge, on synthetic data: timing summaries, rep planning, the error classifier,
below-fp32 source analysis, and output comparison."""

from __future__ import annotations

import ast
import random

import pytest
import torch
from triton.compiler.errors import CompilationError
from triton.runtime.errors import InterpreterError, OutOfResources

from adaexplore_mcp.config import JudgeLimits
from adaexplore_mcp.judge.classify import STAGE_RUN, CandidateFile, classify, from_fault_dump
from adaexplore_mcp.judge.compare import aliased_output, compare, mutated_input
from adaexplore_mcp.judge.precision import source_reasons
from adaexplore_mcp.judge.timing import plan_reps, summarize
from adaexplore_mcp.models import Verdict

CAND_SRC = """import triton
import triton.language as tl

@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    y = tl.float32(offs)
    tl.store(x_ptr + offs, y)
"""
CAND = CandidateFile("/tmp/kernels/cand_abc.py", CAND_SRC)


def test_summarize_reports_median_iqr_min_and_max() -> None:
    s = summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert (s.median_ms, s.min_ms, s.max_ms, s.reps) == (3.0, 1.0, 100.0, 5)
    assert s.iqr_ms == pytest.approx(2.0)


def test_summarize_is_robust_to_outliers_and_ignores_non_finite_samples() -> None:
    rng = random.Random(0)
    samples = [1.0 + rng.gauss(0, 0.01) for _ in range(200)] + [50.0] * 5 + [float("nan")]
    s = summarize(samples)
    assert s.median_ms == pytest.approx(1.0, abs=0.01) and s.reps == 205 and s.max_ms == 50.0


def test_summarize_of_one_sample_has_zero_spread_and_of_none_raises() -> None:
    assert summarize([2.5]).iqr_ms == 0.0
    with pytest.raises(ValueError):
        summarize([])


def test_rep_planning_turns_the_budget_into_counts_within_limits() -> None:
    limits = JudgeLimits(warmup_ms=25, timing_budget_ms=300, min_reps=10, max_reps=200)
    assert plan_reps(1.0, limits) == (25, 200)  # 300 reps capped at 200
    assert plan_reps(3.0, limits) == (8, 100)
    assert plan_reps(100.0, limits) == (1, 10)  # slow calls still get min_reps
    assert plan_reps(0.0, limits)[1] == 200


def _compilation_error() -> CompilationError:
    src = CAND_SRC[CAND_SRC.index("def k"):]
    tree = ast.parse(src)
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == "tl.float32")
    return CompilationError(src, call, "TypeError(\"'dtype' object is not callable\")")


def test_a_gpu_compilation_error_maps_to_the_candidate_line() -> None:
    c = classify(_compilation_error(), STAGE_RUN, CAND)
    assert c.verdict == Verdict.compile_error and not c.poisoned
    assert c.error.exception == "CompilationError"
    assert c.error.source_lineno == 7 and c.error.source_line == "y = tl.float32(offs)"
    assert "not callable" in c.error.message


def test_a_compilation_error_wrapped_in_a_runtime_error_is_still_a_compile_error() -> None:
    try:
        try:
            raise _compilation_error()
        except CompilationError as inner:
            raise RuntimeError("autotuner failed") from inner
    except RuntimeError as exc:
        c = classify(exc, STAGE_RUN, CAND)
    assert c.verdict == Verdict.compile_error and c.error.source_lineno == 7


def test_interpreter_errors_are_compile_errors_except_failed_device_asserts() -> None:
    def wrapped(inner: BaseException) -> InterpreterError:
        try:
            try:
                raise inner
            except BaseException as e:
                raise InterpreterError(repr(e)) from e
        except InterpreterError as outer:
            return outer

    assert classify(wrapped(TypeError("bad")), STAGE_RUN, CAND).verdict == Verdict.compile_error
    assert classify(wrapped(AssertionError("x < n")), STAGE_RUN, CAND).verdict == Verdict.runtime_error


def test_out_of_resources_is_a_compile_error() -> None:
    c = classify(OutOfResources(232448, 101376, "shared memory"), STAGE_RUN, None)
    assert c.verdict == Verdict.compile_error and "Reducing block sizes" in c.error.message


def test_context_poisoning_cuda_errors_are_crashes_that_discard_the_worker() -> None:
    exc = RuntimeError("CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be ...")
    c = classify(exc, STAGE_RUN, CAND)
    assert c.verdict == Verdict.crashed and c.poisoned
    plain = classify(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), STAGE_RUN, CAND)
    assert plain.verdict == Verdict.runtime_error and not plain.poisoned


def test_a_fault_dump_names_the_innermost_candidate_frame() -> None:
    dump = ('Fatal Python error: Segmentation fault\n\nCurrent thread 0x1 (most recent call first):\n'
            f'  File "{CAND.path}", line 7 in k\n  File "{CAND.path}", line 8 in forward\n')
    d = from_fault_dump(dump, CAND, "the worker died", "WorkerCrashed")
    assert d.source_lineno == 7 and "Segmentation fault" in d.message and CAND.path not in d.excerpt


@pytest.mark.parametrize(
    ("snippet", "expected"),
    [
        ("acc = tl.dot(a, b)", "tl.dot without input_precision='ieee'"),
        ("x = x.to(tl.bfloat16)", "tl.bfloat16"),
        ("y = x.half()", ".half()"),
        ("y = x.to(torch.float16)", "torch.float16"),
        ("with torch.autocast('cuda'):\n    pass", "autocast"),
        ("torch.backends.cuda.matmul.allow_tf32 = True", "allow_tf32"),
    ],
)
def test_source_analysis_flags_computation_below_fp32(snippet: str, expected: str) -> None:
    reasons, _ = source_reasons(snippet)
    assert any(expected in r for r in reasons), reasons


def test_ieee_dots_and_plain_fp32_code_are_not_flagged() -> None:
    reasons, tf32 = source_reasons("acc = tl.dot(a, b, input_precision='ieee')\ny = x.to(tl.float32)\n")
    assert reasons == [] and not tf32
    assert source_reasons("acc = tl.dot(a, b, allow_tf32=False)") == ([], False)


def test_a_tf32x3_dot_is_float32_by_source_and_a_tf32_one_is_not() -> None:
    """3xTF32 (two TF32 parts per operand, three products) errs like float32: its source is not flagged, and the
    measured precision judges its output like any other; one TF32 product per dot is below float32."""
    assert source_reasons("acc = tl.dot(a, b, input_precision='tf32x3')") == ([], False)
    reasons, tf32 = source_reasons("acc = tl.dot(a, b, input_precision='tf32')")
    assert tf32 and any("TF32" in r for r in reasons), reasons


def test_comparison_passes_within_tolerance_and_reports_the_worst_element_otherwise() -> None:
    ref = torch.zeros(4, 5)
    assert compare(ref, ref + 0.004, 0, 1e-2, 1e-2, 1e-2) is None
    bad = ref.clone()
    bad[2, 3] = 1.0
    m = compare(ref, bad, 2, 1e-2, 1e-2, 1e-2)
    assert m["reason"] == "values" and m["worst_index"] == [2, 3] and m["trial"] == 2
    assert m["mismatched_fraction"] == pytest.approx(1 / 20)


def test_comparison_statistics_are_exact_across_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks are read back in one transfer each: the worst element, the error maxima and the first
    non-finite element must still be those of the whole output."""
    from adaexplore_mcp.judge import compare as compare_module

    monkeypatch.setattr(compare_module, "CHUNK", 7)
    ref = torch.linspace(1, 2, 40).reshape(5, 8)
    out = ref.clone()
    out[1, 2] += 0.05  # chunk 1
    out[4, 6] += 0.2  # chunk 5: the worst
    m = compare(ref, out, 0, 1e-2, 1e-2, 1e-2)
    assert m["reason"] == "values" and m["worst_index"] == [4, 6] and m["mismatched_fraction"] == 2 / 40
    assert m["max_abs_error"] == pytest.approx(0.2, rel=1e-5)
    assert m["max_rel_error"] == pytest.approx(0.2 / float(ref[4, 6]), rel=1e-5)
    out[3, 1] = float("nan")
    out[4, 0] = float("inf")
    m = compare(ref, out, 0, 1e-2, 1e-2, 1e-2)
    assert m["reason"] == "non_finite" and m["worst_index"] == [3, 1] and m["mismatched_fraction"] == 2 / 40


def test_comparison_checks_output_count_dtype_and_tuple_outputs() -> None:
    a = torch.ones(3)
    assert compare((a, a), (a,), 0, 1e-2, 1e-2, 1e-2)["reason"] == "count"
    assert compare((a, a), [a, a.double()], 0, 1e-2, 1e-2, 1e-2)["reason"] == "dtype"
    assert compare(a, "x", 0, 1e-2, 1e-2, 1e-2)["reason"] == "type"


def test_the_norm_check_catches_many_small_errors_the_elementwise_check_allows() -> None:
    ref = torch.ones(10000) * 0.1
    out = ref + 0.0099  # each element within atol, every one off in the same direction
    m = compare(ref, out, 0, 1e-2, 1e-2, 1e-2)
    assert m is not None and m["reason"] == "norm"


def test_mutation_and_alias_checks() -> None:
    x = torch.randn(8)
    assert mutated_input([x], [x.clone()]) is None
    y = x.clone()
    y[0] += 1
    assert mutated_input([x], [y]) == 0
    assert mutated_input([torch.tensor([float("nan")])], [torch.tensor([float("nan")])]) is None
    assert mutated_input([x, y], [x.clone()]) == 1 and mutated_input([x], []) == 0  # what was not sent back
    assert aliased_output(x[2:], [x]) == (0, 0) and aliased_output(x.clone(), [x]) is None


def test_the_gpu_lock_is_exclusive_across_open_files(tmp_path) -> None:
    import threading
    import time

    from adaexplore_mcp.judge.timing import gpu_lock

    order: list[str] = []

    def other() -> None:
        with gpu_lock(tmp_path, 3):
            order.append("other")

    with gpu_lock(tmp_path, 3):
        t = threading.Thread(target=other)
        t.start()
        time.sleep(0.3)
        order.append("first")
    t.join(5)
    assert order == ["first", "other"]
    assert (tmp_path / "locks" / "gpu3.lock").exists()


def test_the_wall_clock_slope_cancels_what_a_block_costs_once() -> None:
    from adaexplore_mcp.judge.hidden_work import wall_per_call

    # 0.3 ms per call plus 7 ms per block (request, mapping, reply): the slope sees 0.3 ms
    blocks = [([0.25] * n, 7.0 + 0.3 * n, n) for n in (50, 100, 50, 100)]
    assert wall_per_call(blocks) == pytest.approx(0.3)


def test_work_hidden_from_the_events_is_timed_by_the_wall_clock() -> None:
    """The reference calibrates what a call costs outside its events; a candidate whose events claim far
    less than its wall clock allows hid work (side stream, patched events); an honest one did not."""
    from adaexplore_mcp.judge.hidden_work import hidden_per_call

    def blocks(event_ms: float, wall_per_call_ms: float) -> list:
        return [([event_ms] * n, 9.0 + wall_per_call_ms * n, n) for n in (40, 80, 40, 80)]

    ref = blocks(0.35, 0.45)  # 0.1 ms per call outside the events (flush, launches)
    assert hidden_per_call(blocks(0.19, 0.29), [ref]) is None  # honest: the same 0.1 ms outside
    assert hidden_per_call(blocks(0.0001, 0.29), [ref]) == pytest.approx(0.2899)  # patched events: all it hid
    assert hidden_per_call(blocks(0.19, 0.30), [ref]) is None  # 10 us of host noise is not an accusation
    # 25 us more than the reference allows, as honest candidates showed on the H200: still no accusation
    assert hidden_per_call(blocks(0.05, 0.175), [ref]) is None
    # 50 us hidden: timed by the wall clock, with no credit for the 0.1 ms the reference's events miss
    assert hidden_per_call(blocks(0.05, 0.20), [ref]) == pytest.approx(0.15)


def test_one_stalled_block_never_charges_an_honest_candidate() -> None:
    """Measured on the H200: the reference's first block after the candidate's process was killed ran
    tens of ms long, the all-block slope went negative (-0.47 ms per call against 0.39 ms of events), and
    honest candidates were charged 0.03-0.09 ms per call. Pairs of blocks keep such a stall to one pair."""
    from adaexplore_mcp.judge.hidden_work import hidden_per_call, outside_per_pair, wall_per_call

    def blocks(event_ms: float, wall_ms: float, stall_ms: tuple[float, ...] = (0, 0, 0, 0)) -> list:
        return [([event_ms] * n, 9.0 + wall_ms * n + stall, n) for n, stall in zip((30, 60, 30, 60), stall_ms)]

    ref = blocks(0.39, 0.45, stall_ms=(55.0, 0, 0, 0))
    assert wall_per_call(ref) < 0  # what the all-block slope made of it
    assert outside_per_pair(ref) == pytest.approx([0.06 - 55.0 / 30, 0.06])
    honest = blocks(0.131, 0.19)
    assert hidden_per_call(honest, [ref]) is None
    assert hidden_per_call(blocks(0.131, 0.19, stall_ms=(0, 40.0, 0, 0)), [ref]) is None  # its own stall, one pair
    side_stream = blocks(0.131, 0.131 + 0.06 + 0.2)  # 0.2 ms per call on a stream the events do not see
    assert hidden_per_call(side_stream, [ref]) == pytest.approx(0.26)
    patched = blocks(0.0001, 0.19)
    assert hidden_per_call(patched, [ref]) == pytest.approx(0.1899)
    assert hidden_per_call(side_stream, [blocks(0.39, 0.45, stall_ms=(0, 55.0, 0, 0))]) is None  # lenient, never unfair

    # Accused, a candidate is charged all of its excess, not credited the reference's (pairs measured on the H200)
    def paired(event_ms: float, outside: tuple[float, float]) -> list:
        return [([event_ms] * n, 9.0 + (event_ms + o) * n, n)
                for n, o in zip((16, 32, 16, 32), (outside[0], outside[0], outside[1], outside[1]))]

    measured_ref = paired(0.389, (0.0748, 0.1028))
    assert outside_per_pair(measured_ref) == pytest.approx([0.0748, 0.1028])
    assert hidden_per_call(paired(0.0001, (0.2, 0.2)), [measured_ref]) == pytest.approx(0.2)
    # the side stream on the H200 (run 2026-12-04-d): events 0.0058 ms, its least pair 0.1835 ms; credited the
    # reference's 0.078 ms it read 0.111 ms a call against the honest kernel's 0.131 ms (3.50x against 2.97x)
    side = paired(0.0058, (0.1835, 0.19))
    assert 0.0058 + hidden_per_call(side, [paired(0.389, (0.078, 0.1))]) > 0.131


def test_a_candidate_that_pads_its_short_blocks_to_even_out_its_pairs_is_still_charged() -> None:
    """Pairs cancel what a block costs once, and a candidate knows each block's length: hiding 0.1 ms per
    call from its events and stalling each short block by as much again leaves every pair at the
    reference's figure. A long block cannot be made shorter, so its excess still holds the hidden work."""
    from adaexplore_mcp.judge.hidden_work import hidden_per_call, outside_per_pair

    def blocks(event_ms: float, outside_ms: float, hidden_ms: float = 0.0, pad_short: bool = False) -> list:
        return [([event_ms] * n, 9.0 + (event_ms + outside_ms + hidden_ms) * n + (hidden_ms * n if pad_short and
                                                                                  n == 30 else 0.0), n)
                for n in (30, 60, 30, 60)]

    ref = blocks(0.39, 0.06)
    padded = blocks(0.131, 0.06, hidden_ms=0.1, pad_short=True)
    assert outside_per_pair(padded) == pytest.approx(outside_per_pair(ref))  # the pairs see nothing
    # charged its whole excess per call (0.06 outside + 0.1 hidden) beyond the block's fixed 9 ms
    assert hidden_per_call(padded, [ref]) == pytest.approx(0.16)
    assert hidden_per_call(blocks(0.131, 0.06), [ref]) is None  # the honest kernel
    assert hidden_per_call(blocks(0.131, 0.08), [ref]) is None  # 20 us more outside its events: allowed
    # a reference timed with other block lengths (a reused timing) bounds the excess no less leniently
    other = [([0.39] * n, 9.0 + 0.45 * n, n) for n in (20, 40, 20, 40)]
    assert hidden_per_call(blocks(0.131, 0.06), [other]) is None
    assert hidden_per_call(padded, [other]) == pytest.approx(0.16)


def test_a_referee_evaluation_is_profiled_only_when_a_profile_directory_is_named(tmp_path, monkeypatch) -> None:
    import pstats

    from adaexplore_mcp.judge.processes import worker

    monkeypatch.delenv("ADAEXPLORE_PROFILE_DIR", raising=False)
    assert worker._profiled(lambda a, b: a + b, 2, 3) == 5
    assert not list(tmp_path.glob("*.prof"))
    monkeypatch.setenv("ADAEXPLORE_PROFILE_DIR", str(tmp_path))
    assert worker._profiled(lambda a, b: a * b, 2, 3) == 6
    (prof,) = tmp_path.glob("referee-*.prof")
    assert pstats.Stats(str(prof)).total_calls >= 1


def test_the_runners_seeding_leaves_the_states_torch_manual_seed_leaves() -> None:
    """Same seed, same inputs and parameters as KernelBench's own torch.manual_seed (judge/seeding.py)."""
    from adaexplore_mcp.judge import seeding

    for seed in (0, 1, 2**62 + 12345):
        torch.manual_seed(seed)
        expected = (torch.randn(7), torch.nn.Linear(4, 3).weight.detach().clone(), torch.rand(3))
        torch.manual_seed(seed + 1)  # another state in between
        seeding.manual_seed(seed)
        got = (torch.randn(7), torch.nn.Linear(4, 3).weight.detach().clone(), torch.rand(3))
        assert all(torch.equal(a, b) for a, b in zip(expected, got))


def test_a_reference_taken_again_mid_evaluation_is_not_judged_idle(tmp_path, monkeypatch) -> None:
    """The idle watch judges a cached reference runner once, when an evaluation first takes it: the profile and
    the probe take it again mid-evaluation, when it is busy with that evaluation's work (on a GPU this dropped
    the reference under its own evaluation)."""
    from adaexplore_mcp.judge.processes import idle_watch
    from adaexplore_mcp.judge import referee as referee_mod

    class FakeRunner:
        pid, alive = 4242, True

    ref = referee_mod.Reference(("m", ()), FakeRunner(), {"list": []}, [], idle=idle_watch.IdleMark(0.0, 0.0))
    seen = []
    monkeypatch.setattr(idle_watch, "busy_while_idle", lambda pid, mark: seen.append(mark) or None)
    monkeypatch.setattr(referee_mod, "_reference_key", lambda task: ("m", ()))
    ee = referee_mod.Referee.__new__(referee_mod.Referee)
    from collections import OrderedDict
    ee.refs = OrderedDict({("m", ()): ref})
    assert ee.reference({}, 0.0) is ref and ee.reference({}, 0.0) is ref
    assert seen == [idle_watch.IdleMark(0.0, 0.0), None]  # judged on the first take only


def test_a_header_nested_deeper_than_the_stack_is_a_wire_error() -> None:
    """A hostile runner's JSON nested 200,000 deep made json.loads raise RecursionError, which no caller
    expected from the wire (a message the judge cannot read must be a WireError, a broken protocol)."""
    import threading
    from multiprocessing import Pipe

    from adaexplore_mcp.judge import wire

    ours, theirs = Pipe()
    sender = threading.Thread(target=lambda: theirs.send_bytes(b"[" * 200_000 + b"]" * 200_000))
    sender.start()
    with pytest.raises(wire.WireError, match="RecursionError"):
        wire.recv(ours, 1 << 20)
    sender.join()


def test_precision_reads_a_forged_program_without_failing() -> None:
    from adaexplore_mcp.judge.precision import program_reasons

    deep: list = []
    cur = deep
    for _ in range(100_000):
        cur.append([])
        cur = cur[0]
    for program in (None, 5, {"steps": 5, "kernels": [1]}, {"steps": [1, {"op": "x", "args": deep}]}):
        assert program_reasons(program) == []
    assert program_reasons({"steps": [{"op": "aten::_to_copy", "kwargs": {"dtype": {"dtype": "bfloat16"}}}]})


def test_a_process_tree_holding_many_sleeping_processes_is_busy_while_idle() -> None:
    """Red team, round nine: a reference that forked hundreds of sleeping children used no CPU, so the idle watch
    kept it, and it held the host's pids (RLIMIT_NPROC does not bind root) until no runner could start."""
    import subprocess
    import sys
    import time

    from adaexplore_mcp.judge.processes import idle_watch

    holder = subprocess.Popen([sys.executable, "-c", (
        "import os, sys, time\n"
        f"for _ in range({idle_watch.MAX_IDLE_PROCESSES + 8}):\n"
        "    if os.fork() == 0:\n        time.sleep(60); os._exit(0)\n"
        "print('ready', flush=True); time.sleep(60)")], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"ready"
        mark = idle_watch.IdleMark(idle_watch.tree_cpu_s(holder.pid) or 0.0, time.monotonic())
        why = idle_watch.busy_while_idle(holder.pid, mark)
        assert why is not None and "processes behind" in why
    finally:
        subprocess.run(["pkill", "-KILL", "-P", str(holder.pid)], check=False)
        holder.kill()
        holder.wait()


def test_a_runner_that_could_not_fork_into_its_sandbox_says_the_host_is_out_of_processes() -> None:
    from adaexplore_mcp.judge.processes.runners import describe_status
    from adaexplore_mcp.judge.sandbox.core import EXIT_NO_PID_NS

    assert "out of processes" in describe_status(EXIT_NO_PID_NS << 8)  # a wait status: exit code in the high byte
    assert describe_status(3 << 8) == "exited with code 3"
