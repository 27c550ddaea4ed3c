"""The fidelity checks' parts, each on its own (judge/checks/), and the replayed trial pinned in-process."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import torch

from adaexplore_mcp.judge import evaluation
from adaexplore_mcp.judge.checks.buffer_reuse import with_decoy_first
from adaexplore_mcp.judge.checks.measured_precision import below_fp32, measure
from adaexplore_mcp.judge.checks.off_distribution import draw_off_distribution
from adaexplore_mcp.judge.checks.perturbation import lineup, perturb, state_index
from adaexplore_mcp.judge.checks.trial_plan import TrialPlan, draw_plan
from adaexplore_mcp.judge.referee import Referee
from adaexplore_mcp.tasks.format import TaskSpec
from tests.fidelity_cases import ROWS_TASK, elementwise
from tests.test_judge_cases import referee_request


def test_every_later_trial_can_be_the_replayed_one_and_the_first_never_is() -> None:
    plans = [draw_plan(4) for _ in range(200)]
    assert {p.replayed for p in plans} == {1, 2, 3}
    assert {p.reused_buffer for p in plans} == {1, 2, 3}
    assert all(p.off_distribution not in (0, p.replayed) for p in plans)
    assert all(len(set(p.seeds)) == 4 for p in plans)
    one = draw_plan(1)
    assert (one.replayed, one.reused_buffer, one.off_distribution, len(one.seeds)) == (0, None, None, 1)


def test_a_decoy_call_runs_first_on_the_same_buffers_which_get_their_values_back() -> None:
    x = torch.arange(6.0)
    seen: list[tuple[int, list[float]]] = []

    def call(inputs: list) -> tuple[None, dict]:
        seen.append((inputs[0].data_ptr(), inputs[0].tolist()))
        inputs[0].mul_(0)  # a decoy call that writes its input is not held against the real one
        return None, {"launched": []}

    assert with_decoy_first([x], call) is None
    assert seen[0][0] == x.data_ptr() and seen[0][1] != list(range(6)) and sorted(seen[0][1]) == list(range(6))
    assert x.tolist() == list(range(6))
    assert with_decoy_first([x], lambda inputs: (None, {"verdict": "runtime_error"})) == {"verdict": "runtime_error"}


def test_off_distribution_inputs_fall_back_while_the_reference_is_not_finite() -> None:
    x, idx = torch.randn(64), torch.arange(4)
    inputs, out, label = draw_off_distribution([x, idx], lambda xs: xs[0] * 2)
    assert label == "8*x+1" and torch.equal(inputs[0], x * 8 + 1) and inputs[1] is idx and torch.equal(out, (x * 8 + 1) * 2)
    _, _, label = draw_off_distribution([x], lambda xs: torch.exp(xs[0] * 40))
    assert label.startswith("plain")  # overflows under every scaling


def test_parameters_are_perturbed_alike_when_names_or_values_line_up() -> None:
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.LayerNorm(8), torch.nn.BatchNorm1d(8))
    torch.manual_seed(0)
    cand = torch.nn.Module()
    cand.w = torch.nn.Parameter(torch.ones(8))  # ones(8) three times in the reference: no unique partner
    cand.register_buffer("mask", torch.tril(torch.ones(8, 8)))  # a structured buffer: never perturbed
    _, cand_keys, report = lineup(state_index(ref), state_index(cand))
    assert cand_keys == {} and report["tensors"] == 0
    linear = torch.nn.Linear(4, 3)  # drawn at random: carries information already, never perturbed
    linear.scale = torch.nn.Parameter(torch.full((3,), 0.25))
    renamed = torch.nn.Module()
    renamed.gain = torch.nn.Parameter(torch.full((3,), 0.25))  # another name, the same bytes
    ref_keys, cand_keys, report = lineup(state_index(linear), state_index(renamed))
    assert cand_keys == {"gain": "scale"} and ref_keys == {"scale": "scale"} and report["by_value"] == 1
    _, keys, report = lineup(state_index(ref), state_index(ref))
    assert report["by_name"] == 6 and set(keys) == {"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean",
                                                    "1.running_var"}
    twin = torch.nn.Sequential(torch.nn.LayerNorm(8), torch.nn.BatchNorm1d(8))
    assert perturb(ref, 7, keys) == perturb(twin, 7, keys) == 6
    for (name, a), b in zip(ref.state_dict().items(), twin.state_dict().values()):
        assert torch.equal(a, b), name
    assert not torch.equal(ref[0].weight, torch.ones(8)) and bool(ref[1].running_var.min() > 0)
    assert bool(ref[0].bias.abs().max() > 0)


def test_measured_error_far_above_the_references_own_is_below_fp32() -> None:
    exact = torch.randn(256, dtype=torch.float64)
    ref = exact.float()
    bf16 = exact.to(torch.bfloat16).float()
    honest = measure([ref], [ref], [exact])
    lowp = measure([ref], [bf16], [exact])
    assert honest is not None and not below_fp32(honest)
    assert lowp is not None and below_fp32(lowp) and lowp["candidate"] > 1e-3


FIRST_TWO_CALLS = elementwise("    y = x * 2 + 1", init="        self.calls = 0\n", forward='''        self.calls += 1
        y = ew(x)
        if self.calls <= 2:
            return y
        return x * 2 + 1  # PyTorch's, beside a kernel that still launched''')


def test_the_real_kernel_on_the_first_calls_only_is_caught_when_a_later_trial_is_replayed(monkeypatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(evaluation, "draw_plan", lambda n: TrialPlan(seeds=tuple(range(1, n + 1)), replayed=2,
                                                                     reused_buffer=None, off_distribution=1))
    home = Path(tempfile.mkdtemp(dir="/var/tmp"))
    referee = Referee("cpu", home, home / "logs", home / "cache")
    spec = TaskSpec(task_id="first-two", name="first-two", source=ROWS_TASK.format(expr="x * 2 + 1"))
    try:
        result = evaluation.evaluate(referee, referee_request("first_two", FIRST_TWO_CALLS, spec),
                                     lambda f, m: None).fields
        assert result["verdict"] == "rejected", result
        assert result["rejected"]["check"] == "work_not_in_candidate_kernels", result
        assert result["fidelity"]["replayed_trial"] == 2
    finally:
        referee.close()
        shutil.rmtree(home, ignore_errors=True)


def test_a_value_read_back_into_a_launch_is_recomputed_by_the_replay_and_item_is_put_back(tmp_path: Path,
                                                                                          monkeypatch) -> None:
    from adaexplore_mcp.judge.host_scalars import HostScalar, evaluate
    from tests.fidelity_cases import ITEM_CHAIN
    from tests.test_work_replay import load, record, replay

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    item = torch.Tensor.item
    module = load(tmp_path, ITEM_CHAIN, "cand_item_chain")
    model = module.ModelNew()
    trace, _ = record(module, model, torch.randn(4, 32))
    assert torch.Tensor.item is item  # the recording's patch is gone
    launch = [s for s in trace.program()["steps"] if s.get("launch") == "scale_kernel"][0]
    assert launch["args"]["l"][3] == {"hexpr": ["/", ["c", 128.0], ["h", 0]]}
    fresh = torch.randn(4, 32) * 3
    run, got = replay(tmp_path, ITEM_CHAIN.replace("cand_item_chain", "x"), trace, fresh)
    assert run.host_differs is not None  # another value came back, and the launch used it
    torch.testing.assert_close(got, fresh / fresh.abs().mean())
    assert evaluate(["neg", ["abs", ["h", 0]]], {0: -2.0}, float) == -2.0
    assert -HostScalar(2.0, ["h", 0]) == -2.0 and isinstance(abs(HostScalar(-2.0, ["h", 0])), HostScalar)


def test_second_shape_sets_move_the_batch_and_the_sizes_boldest_first() -> None:
    from adaexplore_mcp.judge.checks.second_shapes import rungs

    source = "batch_size = 128\nheads = 8\nembed = 256\nseq_len = 2048\nbias_shape = (embed, 1)\n"
    bold, by_eight, batch_only = rungs(source, {"seq_len": 64})
    assert bold == {"batch_size": 127, "embed": 193, "seq_len": 49}  # odd: no multiple of 16 or of a block
    assert by_eight == {"batch_size": 127, "embed": 200, "seq_len": 56}  # multiples of 8, not of 16 (head counts)
    assert batch_only == {"seq_len": 64, "batch_size": 127}
    assert rungs("x = 3\n", {}) == []  # nothing to move: create_task says so


def test_a_replay_wrong_on_values_says_so_with_the_mismatch_detail() -> None:
    from types import SimpleNamespace

    from adaexplore_mcp.judge.outcome import Outcome
    from adaexplore_mcp.judge.replay.referee_side import _wrong_values

    ev = SimpleNamespace(out=Outcome())
    values = {"output_index": 0, "trial": 0, "shape": [4], "reason": "values", "max_abs_error": 0.5,
              "mismatched_fraction": 0.25}
    assert _wrong_values(ev, values) is False
    assert ev.out.fields["mismatch"]["inputs"] == "replay" and ev.out.fields["mismatch"]["max_abs_error"] == 0.5
    message = ev.out.fields["rejected"]["message"]
    assert "on values" in message and "max_abs_error=0.5" in message and "numerical error" in message
    nan = SimpleNamespace(out=Outcome())
    _wrong_values(nan, {**values, "reason": "non_finite"})
    assert "never wrote" in nan.out.fields["rejected"]["message"]
