"""Integer, bool and complex outputs are compared for what they are: exactly, and with both parts."""

from __future__ import annotations

import torch

from adaexplore_mcp.judge.compare import compare

TOL = (1e-2, 1e-2, 0.05)


def test_an_index_one_off_is_a_mismatch_even_where_a_tolerance_would_pass_it() -> None:
    ref = torch.tensor([3, 150, 7], dtype=torch.int64)
    got = ref.clone()
    got[1] = 151  # within atol + rtol * 150
    found = compare(ref, got, 0, *TOL)
    assert found is not None and found["reason"] == "values" and found["worst_index"] == [1], found
    assert compare(ref, ref.clone(), 0, *TOL) is None


def test_integers_beyond_float64s_precision_are_compared_exactly() -> None:
    ref = torch.tensor([2**60], dtype=torch.int64)
    assert compare(ref, ref + 1, 0, *TOL) is not None


def test_bool_masks_are_compared_exactly() -> None:
    ref = torch.tensor([True, False, True])
    assert compare(ref, torch.tensor([True, True, True]), 0, *TOL)["mismatched_fraction"] == 1 / 3
    assert compare(ref, ref.clone(), 0, *TOL) is None


def test_the_imaginary_part_of_a_complex_output_counts() -> None:
    ref = torch.complex(torch.randn(64), torch.randn(64))
    assert compare(ref, ref.clone(), 0, *TOL) is None
    assert compare(ref, torch.complex(ref.real, torch.zeros(64)), 0, *TOL) is not None
