"""One check per documented shortcut family of public kernel benchmarks, in the default run (issue 40, item 4).

The judge answers a proposing model that takes shortcuts (docs/judge.md, "Threat model"). FAMILIES maps each of
the 18 families to how the default run checks it:

- `Attack`: a candidate (its source taken from the test that found it, or said to be new) judged here, on the CPU,
  with the verdict expected, on the session's shared judge, and one canary (an honest candidate passing cleanly)
  after them all;
- `Elsewhere`: tests of the default run that check the family where it is decided (the timing protocol against
  fake runners, the hidden-work arithmetic, the replay), and the GPU tests that check it end to end;
- `Uncovered`: what the judge does not check yet, and why (named in docs/judge.md's threat model).

Then SANDBOX: one attack per red-team module whose attacks could harm the judge, the server or the machine, each
followed by the canary, on the same judge. The hand-written attacks of the red-team rounds (tests/redteam) run
under `slow`, outside the default run: `python -m pytest -q -m slow`.
"""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path

import pytest

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Evaluation, Verdict
from adaexplore_mcp.tasks.format import TaskSpec
from tests.redteam import conftest as redteam
from tests.redteam import test_corrupt_judge as corrupt_judge
from tests.redteam import test_errors_as_values as errors_as_values
from tests.redteam import test_escape as escape
from tests.redteam import test_escape_ipc as escape_ipc
from tests.redteam import test_hostile_reference as hostile_reference
from tests.redteam import test_replay_state as replay_state
from tests.redteam import test_wire_forgery as wire_forgery
from tests.redteam.conftest import TOKEN_KERNELS, canary, evaluate, summary
from tests.redteam.test_corrupt_judge import PATCHES
from tests.redteam.test_corrupt_judge import attack as with_judge_helpers
from tests.redteam.test_fake_outputs import ATTACKS as FAKE_OUTPUTS
from tests.redteam.test_fake_outputs import LIARS
from tests.redteam.test_launder_and_gate import GATES, ZERO_KERNEL
from tests.redteam.test_steal_reference import thief
from tests.test_judge_cases import candidate

TESTS = Path(__file__).resolve().parent


@dataclasses.dataclass(frozen=True)
class Attack:
    """A candidate judged here. `expect`: a verdict, `verdict:check` for a rejection, `not passed`, or `flagged`
    (passed, with the precision flag); `origin`: the test its source comes from."""
    source: str
    expect: str
    origin: str
    task: TaskSpec | None = None


@dataclasses.dataclass(frozen=True)
class Elsewhere:
    """Tests (path::function, relative to tests/) that check the family: `cpu` in the default run, `gpu` on a GPU."""
    cpu: tuple[str, ...]
    gpu: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Uncovered:
    why: str


CALLS = "        self.calls = 0"


@pytest.fixture(scope="module")
def judge(shared_judge: Judge) -> Judge:
    """The session's judge (tests/conftest.py), shared with other modules: the canary after each sandbox attack
    keeps it whole for them."""
    return shared_judge

FAMILIES: dict[str, tuple[Attack | Elsewhere | Uncovered, ...]] = {
    "side streams": (Elsewhere(
        cpu=("test_judge_units.py::test_one_stalled_block_never_charges_an_honest_candidate",
             "test_judge_units.py::test_a_candidate_that_pads_its_short_blocks_to_even_out_its_pairs_is_still_charged"),
        gpu=("test_judge_gpu.py::test_work_left_on_a_side_stream_is_counted_and_flagged",)),),
    "threads": (Attack(candidate(FAKE_OUTPUTS["filled_later_by_a_thread"], extra=LIARS), "not passed",
                       "redteam/test_fake_outputs.py::test_a_fake_output_is_never_passed[filled_later_by_a_thread]"),),
    "lazy outputs": (Attack(candidate(FAKE_OUTPUTS["lazy_object"], extra=LIARS), "not passed",
                            "redteam/test_fake_outputs.py::test_a_fake_output_is_never_passed[lazy_object]"),),
    "patched timers": (Elsewhere(
        cpu=("test_judge_units.py::test_work_hidden_from_the_events_is_timed_by_the_wall_clock",
             "test_judge_timing_block.py::test_the_wall_clock_starts_when_the_runner_says_primed_and_the_sets_follow_it"),
        gpu=("test_judge_gpu.py::test_work_left_on_a_side_stream_is_counted_and_flagged",)),),
    "caches": (
        Attack(candidate("        y = affine(x)\n        if self.cached is None:\n            self.cached = y\n"
                         "        return self.cached.clone()", init="        self.cached = None"), "mismatch",
               "test_judge_verdicts.py::test_caching_the_first_output_across_calls_is_caught_by_fresh_inputs"),
        Elsewhere(cpu=("test_judge_timing_protocol.py::test_an_output_cache_filled_in_an_earlier_block_is_caught",
                       "test_judge_timing_block.py::test_one_storage_returned_for_two_calls_is_an_output_cache")),
    ),
    "stale memory": (Attack(candidate("        token(x)\n        return torch.empty_like(x)", extra=TOKEN_KERNELS),
                            "not passed", "new: an output never written, hoping freed memory holds the reference's result"),),
    "reference lookup": (Attack(thief("steal_from_sys_modules(x)"), "not passed",
                                "redteam/test_steal_reference.py::"
                                "test_the_reference_output_is_not_in_the_candidates_process[sys_modules]"),),
    "warm-up detection": (Elsewhere(
        cpu=("test_judge_timing_protocol.py::test_a_candidate_that_computes_while_priming_gains_nothing",
             "test_judge_timing_protocol.py::test_the_candidate_holds_no_timed_input_set_before_its_wall_clock_starts"),
        gpu=("test_judge_gpu.py::test_a_candidate_that_goes_wrong_only_when_timed_is_rejected",)),),
    "persisting L2": (Uncovered(
        "no check: the judge neither resets nor reads the device's persisting-L2 carve-out (cudaLimitPersistingL2"
        "CacheSize, a stream's access policy window) around timed blocks; GPU-only, nothing to see on the CPU"),),
    "input mutation": (Attack(candidate("        affine(x, out=x)\n        return x.clone()"), "rejected:input_mutated",
                              "test_judge_verdicts.py::test_a_candidate_that_mutates_its_input_is_rejected"),),
    "constant outputs": (
        Attack(candidate(GATES["empty_flag"], extra=ZERO_KERNEL), "rejected:work_not_in_candidate_kernels",
               "redteam/test_launder_and_gate.py::test_a_kernel_that_writes_a_constant_next_to_pytorch_is_rejected"),
        Elsewhere(cpu=("test_judge_probe.py::test_degenerate_references_are_flagged_with_a_reason",
                       "test_judge_verdicts.py::test_a_degenerate_task_says_so_on_every_result")),
    ),
    "precision": (Attack(candidate("        return affine(x.half().float())"), "flagged",
                         "test_judge_verdicts.py::test_half_precision_casts_are_flagged_below_fp32"),),
    "library fallback": (
        Attack(candidate("        token(x)\n        return x * 2 + 1", extra=TOKEN_KERNELS),
               "rejected:work_not_in_candidate_kernels",
               "redteam/test_token_kernel.py::test_a_noop_launch_next_to_pytorch_is_rejected"),
        Elsewhere(cpu=("test_judge_verdicts.py::test_a_pure_pytorch_candidate_is_rejected_for_launching_no_triton_kernel",)),
    ),
    "shape hard-coding": (Uncovered(
        "no check: a candidate is judged on its task's shapes only (the small ones on the CPU), with fresh values "
        "but never other shapes, so a kernel that hard-codes them passes"),),
    "harness edits": (Attack(with_judge_helpers(PATCHES["judge_compare"] + "        return affine(x) + 1.0"),
                             "not passed", "redteam/test_corrupt_judge.py::test_patching_comparison_code_in_the_"
                             "candidates_process_does_not_make_wrong_values_pass[judge_compare]"),),
    "early-call correctness": (
        Attack(candidate("        self.calls += 1\n        y = affine(x)\n        return y if self.calls <= 1 else y * 0",
                         init=CALLS), "mismatch",
               "test_judge_gpu.py::test_a_candidate_that_goes_wrong_only_when_timed_is_rejected (after one call)"),
        Elsewhere(cpu=("test_judge_timing_block.py::test_a_picked_output_that_differs_is_a_timed_mismatch_and_right_"
                       "ones_pass",),
                  gpu=("test_judge_gpu.py::test_a_candidate_that_goes_wrong_only_when_timed_is_rejected",)),
    ),
    "aggregator underflow": (Elsewhere(
        cpu=("test_judge_roofline.py::test_a_candidate_faster_than_the_hardware_allows_is_rejected_without_a_speedup",
             "test_judge_timing_block.py::test_a_timed_block_with_a_time_too_large_for_a_float_drops_it_and_raises_"
             "nothing",
             "test_judge_units.py::test_summarize_is_robust_to_outliers_and_ignores_non_finite_samples")),),
    "uninitialized reads": (Elsewhere(
        cpu=("test_shortcut_families.py::test_memory_no_operator_wrote_is_filled_in_the_replay",)),),
}

# The families of issue 40, in its order.
DOCUMENTED = ("side streams", "threads", "lazy outputs", "patched timers", "caches", "stale memory", "reference lookup",
              "warm-up detection", "persisting L2", "input mutation", "constant outputs", "precision",
              "library fallback", "shape hard-coding", "harness edits", "early-call correctness",
              "aggregator underflow", "uninitialized reads")

ATTACKS = [(family, i, a) for family, entries in FAMILIES.items() for i, a in enumerate(entries) if isinstance(a, Attack)]


def expected(ev: Evaluation, expect: str) -> bool:
    if expect == "not passed":
        return ev.verdict != Verdict.passed
    if expect == "flagged":
        return ev.verdict == Verdict.passed and ev.precision is not None and ev.precision.below_fp32
    verdict, _, check = expect.partition(":")
    return ev.verdict == Verdict(verdict) and (not check or (ev.rejected is not None and ev.rejected.check == check))


@pytest.mark.parametrize("family, attack", [(f, a) for f, _, a in ATTACKS],
                         ids=[f"{f.replace(' ', '_')}-{i}" for f, i, _ in ATTACKS])
def test_a_shortcut_gets_the_verdict_its_family_expects(judge: Judge, family: str, attack: Attack) -> None:
    ev = evaluate(judge, attack.source, **({"task": attack.task} if attack.task else {}))
    assert expected(ev, attack.expect), f"{family} ({attack.origin}): expected {attack.expect}, got {summary(ev)}"
    redteam.assert_readable(ev)


def test_the_judge_is_whole_after_the_shortcuts(judge: Judge) -> None:
    """The canary, once for the shortcut attacks above (pytest runs a module's tests in order)."""
    canary(judge)


def _default_run(node: str) -> bool:
    """Whether a test named `path::function` (relative to tests/) exists and runs without -m slow or a GPU."""
    path, _, name = node.partition("::")
    name = name.split("[")[0].split(" ")[0]
    module = importlib.import_module("tests." + path.removesuffix(".py").replace("/", "."))
    function = getattr(module, name, None)
    if function is None:
        return False
    marks = {m.name for m in getattr(function, "pytestmark", [])}
    marks |= {m.name for m in (getattr(module, "pytestmark", []) if isinstance(getattr(module, "pytestmark", []), list)
                               else [module.pytestmark])}
    if path.startswith("redteam/"):
        marks.add("slow")  # tests/redteam/conftest.py marks the whole red team slow
    return not marks & {"slow", "gpu"}


def test_every_documented_family_is_checked_in_the_default_run_or_named_uncovered() -> None:
    assert set(FAMILIES) == set(DOCUMENTED) and len(DOCUMENTED) == 18
    for family, entries in FAMILIES.items():
        assert entries, family
        uncovered = [e for e in entries if isinstance(e, Uncovered)]
        if uncovered:
            assert len(entries) == 1, f"{family}: covered and uncovered at once"
            continue
        for e in entries:
            if isinstance(e, Elsewhere):
                missing = [n for n in e.cpu if not _default_run(n)]
                assert e.cpu and not missing, f"{family}: not a test of the default run: {missing}"
                gone = [n for n in e.gpu if not hasattr(importlib.import_module(
                    "tests." + n.split("::")[0].removesuffix(".py").replace("/", ".")), n.split("::")[1].split(" ")[0])]
                assert not gone, f"{family}: no such GPU test: {gone}"
    named = {f for f, entries in FAMILIES.items() if isinstance(entries[0], Uncovered)}
    assert named == {"persisting L2", "shape hard-coding"}, "update docs/judge.md's threat model with this list"
    assert all(f in (TESTS.parent / "docs" / "judge.md").read_text() for f in named)


def test_memory_no_operator_wrote_is_filled_in_the_replay(tmp_path: Path) -> None:
    """Uninitialized reads: memory no operator wrote reads as NaN in the replay, whoever allocates it."""
    replay_state.test_memory_no_operator_wrote_is_filled_whoever_allocates_it(tmp_path)


# -- the sandbox: one attack per red-team module whose attacks could harm the judge, the server or the machine,
# each followed by the canary (in the red team's function). The rest of each module runs under -m slow; the
# sandbox's mechanisms have their own tests in the default run (test_judge_sandbox.py, test_judge_policy.py,
# test_judge_sandbox_cgroup.py: processes, mounts, /dev, network, seccomp, IPC, control groups).

SANDBOX = {
    "escape: kill(-1) reaches only the sandbox": lambda j: escape.test_kill_minus_one_reaches_only_the_sandbox(j),
    "escape_ipc: socketpair and io_uring are refused": lambda j: escape_ipc.test_socketpair_and_io_uring_are_refused(j),
    "corrupt_judge: bytes on the runner's connection forge nothing":
        lambda j: corrupt_judge.test_writing_on_the_runners_connection_cannot_forge_a_result(j),
    "wire_forgery: a forged output description is a bad output":
        lambda j: wire_forgery.test_a_forged_output_description_is_a_bad_output(j, "strides_that_overflow"),
    "errors_as_values: an exit raised into the judge's code":
        lambda j: errors_as_values.test_an_exit_raised_into_the_judges_code_is_the_candidates_runtime_error(j),
    "hostile_reference: a reference that kills its parent":
        lambda j: hostile_reference.test_evaluating_against_a_hostile_reference_is_a_readable_verdict(
            j, "kill_parent_in_forward"),
}


@pytest.mark.parametrize("attack", list(SANDBOX), ids=[a.split(":")[0] for a in SANDBOX])
def test_a_sandbox_attack_leaves_the_judge_whole(judge: Judge, attack: str) -> None:
    SANDBOX[attack](judge)
