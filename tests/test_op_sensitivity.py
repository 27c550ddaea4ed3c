"""Whether a PyTorch operator's result depends on a kernel's values (op_sensitivity.py), and the runs of bytes a
launch changed (copy_trace.changed_runs): two measurements the copy trace decides with."""

from __future__ import annotations

import torch

from adaexplore_mcp.judge.byte_values import MAX_RUNS, changed_runs
from adaexplore_mcp.judge.op_sensitivity import ignores

aten = torch.ops.aten


def test_a_kernel_value_mixed_in_to_no_effect_is_ignored() -> None:
    x, k = torch.randn(256), torch.randn(256)
    tiny = k * 1e-30
    assert ignores(aten.add.Tensor, (x, k), {"alpha": 0.0}, torch.add(x, k, alpha=0.0), [k])
    assert ignores(aten.add.Tensor, (x, tiny), {}, x + tiny, [tiny])
    far = k - 1e6
    assert ignores(aten.maximum.default, (x, far), {}, torch.maximum(x, far), [far])


def test_a_kernel_value_that_changes_the_result_is_not_ignored() -> None:
    x, k = torch.randn(256), torch.randn(256)
    assert not ignores(aten.add.Tensor, (x, k), {}, x + k, [k])
    a, b = k.reshape(16, 16), x.reshape(16, 16)
    assert not ignores(aten.mm.default, (a, b), {}, a @ b, [a])
    scores = torch.randn(32, 8)
    assert not ignores(aten.argmax.default, (scores, 1), {}, scores.argmax(1), [scores])  # indices from a kernel's
    mask = torch.rand(256) > 0.5
    assert not ignores(aten.where.self, (mask, x, k), {}, torch.where(mask, x, k), [mask])


def test_the_call_s_own_memory_is_never_written() -> None:
    x, k, out = torch.randn(64), torch.randn(64), torch.zeros(64)
    torch.add(x, k, alpha=0.0, out=out)
    kept, before = out.clone(), k.clone()
    assert ignores(aten.add.out, (x, k), {"alpha": 0.0, "out": out}, out, [k])
    assert torch.equal(out, kept) and torch.equal(k, before)


def test_a_random_operator_runs_again_with_the_same_draws_and_leaves_the_generator_as_it_was() -> None:
    y = torch.randn(256)
    tiny, wide = (torch.rand(256) * 1e-38, torch.rand(256) + 0.5)
    normal = torch.ops.aten.normal.Tensor_Tensor
    for std, expected in ((tiny, True), (wide, False)):
        state = torch.random.get_rng_state()
        got = normal(y, std)
        after = torch.random.get_rng_state()
        torch.random.set_rng_state(state)
        assert ignores(normal, (y, std), {}, got, [std]) is expected  # draws a std a millionth of an ulp: none
        assert torch.equal(torch.random.get_rng_state(), state)
        torch.random.set_rng_state(after)


def test_values_far_below_a_maximum_are_ignored_however_wide_their_spread() -> None:
    """Round fourteen: half a million below, half 1e30 below; noise of their spread crossed the maximum."""
    x = torch.randn(256)
    k = x + torch.where(torch.rand(256) > 0.5, -1e30, -1e6)
    assert ignores(aten.maximum.default, (x, k), {}, torch.maximum(x, k), [k])


def test_complex_kernel_values_are_changed_too() -> None:
    y, k = torch.randn(64, dtype=torch.complex64), torch.randn(64, dtype=torch.complex64)
    assert ignores(aten.add.Tensor, (y, k), {"alpha": 0}, torch.add(y, k, alpha=0), [k])
    assert not ignores(aten.add.Tensor, (y, k), {}, y + k, [k])


def test_an_operator_that_fails_on_the_copies_counts_as_depending() -> None:
    def broken(*args: object, **kwargs: object) -> torch.Tensor:
        raise RuntimeError("no")

    k = torch.randn(8)
    assert not ignores(broken, (k,), {}, k, [k])


def test_changed_runs_split_writes_far_apart_and_join_near_ones() -> None:
    changed = torch.zeros(4 * 512, dtype=torch.bool)
    changed[0:4] = True
    changed[-4:] = True
    assert changed_runs(changed, 4) == [(0, 4), (2044, 2048)]
    changed[:] = False
    changed[4 * 10 + 1] = True  # one byte of element 10, and elements 20 and 21: one run, whole elements
    changed[4 * 20:4 * 22] = True
    assert changed_runs(changed, 4) == [(40, 88)]
    assert changed_runs(torch.zeros(64, dtype=torch.bool), 4) == []


def test_changed_runs_beyond_their_bound_are_split_at_the_widest_gaps() -> None:
    """Seventy one-element writes 200 elements apart (1.5% of the storage) claim a few gaps, never all of it (round
    fourteen: one range from the first change to the last credited a kernel with every element between)."""
    changed = torch.zeros(4 * 200 * 70, dtype=torch.bool)
    changed[::4 * 200] = True
    changed[4 * 200 * 35 + 4:4 * 200 * 35 + 8] = True  # element 7001 beside element 7000: its gap is the narrowest
    ranges = changed_runs(changed, 4)
    assert len(ranges) == MAX_RUNS
    covered = sum(b - a for a, b in ranges)
    assert covered <= 4 * (70 + 1 + 7 * 200), ranges
    flags = torch.zeros_like(changed)
    for a, b in ranges:
        flags[a:b] = True
    assert bool(flags[changed].all())
