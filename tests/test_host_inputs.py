"""The replay's sets keep the replayed trial's numbers (judge/host_inputs.py)."""

from __future__ import annotations

import torch

from adaexplore_mcp.judge.host_inputs import host_values, on_device


def test_numbers_are_kept_by_type_and_tensors_are_the_new_sets() -> None:
    trial = [torch.ones(2), 2.5, 3, True, "mean", None, float("nan"), [1, 2]]
    keep = host_values(trial)
    assert keep == [None, 2.5, 3, True, "mean", None, None, None]
    drawn = [torch.zeros(2), 7.0, 9, False, "sum", None, 1.0, [3]]
    got = on_device(drawn, "cpu", keep)
    assert torch.equal(got[0], torch.zeros(2)) and got[1:] == [2.5, 3, True, "mean", None, 1.0, [3]]
    assert on_device([1.0, 2], "cpu", [2, 3.0]) == [1.0, 2]  # another type: the drawn value stays
    assert on_device([1.0], "cpu", None) == [1.0] and on_device([1.0], "cpu", [1.0, 2.0]) == [1.0]
