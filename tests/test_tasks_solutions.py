"""Every built-in task's Triton solutions match the reference at small shapes (CPU interpreter)."""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"  # must precede the first triton import

import itertools
import random
import time
from pathlib import Path

import pytest
import torch

from adaexplore_mcp.tasks.format import apply_shapes, import_file, write_module_file
from adaexplore_mcp.tasks.library import builtin_tasks
from adaexplore_mcp.tasks.solutions import parse_tunables, set_tunable, solutions

TASKS = {t.name: t for t in builtin_tasks()}
CASES = [(s.task_name, s.variant) for name in TASKS for s in solutions(name)]


def _load(tmp: Path, prefix: str, source: str):
    name, path = write_module_file(tmp, prefix, source)
    return import_file(name, path)


def other_combination(sol, seed: int = 0) -> dict[str, int]:
    """One non-default allowed combination: every tunable moved to another allowed value."""
    rng = random.Random(f"{sol.task_name}/{sol.variant}/{seed}")
    combo = {}
    for name, values in sol.tunables.items():
        others = [v for v in values if v != sol.defaults[name]]
        combo[name] = rng.choice(others) if others else sol.defaults[name]
    return combo


def count_launches(module) -> list[int]:
    import triton

    counter = [0]
    for obj in vars(module).values():
        if isinstance(obj, triton.runtime.KernelInterface) and hasattr(obj, "add_pre_run_hook"):
            obj.add_pre_run_hook(lambda *a, **k: counter.__setitem__(0, counter[0] + 1))
    return counter


def run_pair(task, source: str, tmp: Path, seed: int = 0):
    ref_mod = _load(tmp, "ref", task.source)
    apply_shapes(ref_mod, task.small_shapes)
    torch.manual_seed(seed)
    ref = ref_mod.Model(*ref_mod.get_init_inputs()).eval()
    new_mod = _load(tmp, "cand", source)
    new = new_mod.ModelNew(*ref_mod.get_init_inputs()).eval()
    ref_state, new_state = ref.state_dict(), new.state_dict()
    assert set(ref_state) == set(new_state), (sorted(ref_state), sorted(new_state))
    for k, v in ref_state.items():
        assert new_state[k].shape == v.shape, k
    new.load_state_dict(ref_state, strict=False)
    inputs = ref_mod.get_inputs()
    saved = [x.clone() for x in inputs]
    counter = count_launches(new_mod)
    with torch.no_grad():
        expected = ref(*inputs)
        got = new(*inputs)
    for x, y in zip(inputs, saved):
        assert torch.equal(x, y), "the candidate modified its input"
    return expected, got, counter[0]


def assert_close(expected, got):
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert torch.isfinite(got).all()
    err = (got - expected).abs()
    tol = 1e-2 + 1e-2 * expected.abs()
    assert bool((err <= tol).all()), f"max abs err {err.max().item():.3g}"


def test_every_task_has_a_solution():
    for name in TASKS:
        assert solutions(name), name
    assert sum(len(solutions(n)) >= 2 for n in TASKS) >= 5


def test_tunables_parse_and_edit():
    for name in TASKS:
        for sol in solutions(name):
            assert sol.tunables, (name, sol.variant)
            for k, values in sol.tunables.items():
                assert sol.defaults[k] in values and len(values) >= 2, (name, sol.variant, k)
            combo = other_combination(sol)
            src = sol.source
            for k, v in combo.items():
                src = set_tunable(src, k, v)
            assert parse_tunables(src)[1] == combo


@pytest.mark.parametrize("task_name,variant", CASES, ids=[f"{t}-{v}" for t, v in CASES])
def test_solution_matches_reference(task_name, variant, tmp_path):
    task = TASKS[task_name]
    sol = next(s for s in solutions(task_name) if s.variant == variant)
    for combo in (sol.defaults, other_combination(sol)):
        src = sol.source
        for k, v in combo.items():
            src = set_tunable(src, k, v)
        expected, got, launches = run_pair(task, src, tmp_path)
        assert launches >= 1, "no Triton kernel launched"
        assert_close(expected, got)
