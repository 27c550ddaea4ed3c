"""Task synthesis: seeded, valid, varied, KernelBench format."""

from __future__ import annotations

from functools import lru_cache

from adaexplore_mcp.tasks.format import check_small_shapes, check_static, integer_constants
from adaexplore_mcp.tasks.synthesis import (
    SynthesizedTask,
    is_valid_locally,
    load_source,
    nondegeneracy_problem,
    synthesize,
)


@lru_cache(maxsize=None)
def _tasks(count: int, seed: int) -> tuple[SynthesizedTask, ...]:
    return tuple(synthesize(count, seed=seed))


def test_reproducible_and_seed_dependent():
    a = _tasks(20, 11)
    b = synthesize(20, seed=11)
    assert [t.source for t in a] == [t.source for t in b]
    assert [t.name for t in a] == [t.name for t in b]
    c = synthesize(5, seed=12, validate=False)
    assert [t.source for t in c] != [t.source for t in a[:5]]


def test_twenty_tasks_valid_and_in_format():
    tasks = _tasks(20, 11)
    assert len(tasks) == 20
    assert len({t.name for t in tasks}) == 20
    assert len({t.source for t in tasks}) == 20
    assert sum(t.dtype == "float32" for t in tasks) >= 16
    for t in tasks:
        assert t.name.startswith("syn_") and t.name.isidentifier()
        check_static(t.source, max_bytes=1 << 20)
        check_small_shapes(t.source, t.small_shapes)
        assert t.small_shapes and integer_constants(t.source)
        assert 2 <= len(t.ops) <= 5 and t.description
        ok, reason = is_valid_locally(t)
        assert ok, (t.name, reason)


def test_variety_of_op_families():
    tasks = _tasks(20, 11)
    heads = {t.families[0] for t in tasks}
    families = {f for t in tasks for f in t.families[1:]}
    assert len(heads) >= 3, heads
    assert len(families) >= 4, families


def test_low_precision_tasks_state_their_tolerance():
    tasks = synthesize(30, seed=5, validate=False)
    assert sum(t.dtype == "float32" for t in tasks) >= 0.8 * len(tasks)
    for t in tasks:
        if t.dtype != "float32":
            assert t.atol > 1e-2 and f"torch.{t.dtype}" in t.source and t.dtype in t.description


def test_degenerate_reference_is_rejected():
    source = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.mean(x, dim=1, keepdim=True) * 0.0 + 1.0


batch_size = 8
dim = 64


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''
    problem = nondegeneracy_problem(load_source(source), {})
    assert problem and "constant" in problem
    ok, reason = is_valid_locally(SynthesizedTask("deg", source, {"batch_size": 4}, "d", ("x",)))
    assert not ok and "constant" in reason
