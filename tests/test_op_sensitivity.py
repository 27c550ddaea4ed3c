"""Whether a PyTorch operator's result depends on a kernel's values (op_sensitivity.py), and the runs of bytes a
launch changed (copy_trace.changed_runs): two measurements the copy trace decides with."""

from __future__ import annotations

import torch

from adaexplore_mcp.judge.copy_trace import changed_runs
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


def test_a_random_operator_is_never_run_again() -> None:
    x = torch.randn(64)
    torch.manual_seed(0)
    y = torch.ops.aten.native_dropout.default(x, 0.0, True)
    state = torch.random.get_rng_state()
    assert not ignores(torch.ops.aten.native_dropout.default, (x, 0.0, True), {}, y, [x])
    assert torch.equal(torch.random.get_rng_state(), state)


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


def test_changed_runs_beyond_their_bound_are_one_range() -> None:
    changed = torch.zeros(4 * 200 * 70, dtype=torch.bool)
    changed[::4 * 200] = True  # 70 runs, 200 elements apart
    assert changed_runs(changed, 4) == [(0, 4 * 200 * 69 + 4)]
