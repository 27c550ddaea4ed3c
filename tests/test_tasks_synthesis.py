"""Task synthesis: seeded, well-formed, varied, KernelBench format; degenerate tasks dropped by the worker probe."""

from __future__ import annotations

import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from adaexplore_mcp.app import App
from adaexplore_mcp.config import Settings
from adaexplore_mcp.tasks.format import check_small_shapes, check_static, integer_constants
from adaexplore_mcp.tasks.synthesis import SynthesizedTask, synthesize
from adaexplore_mcp.tasks.synthesis_checks import format_problem

ROOT = Path(__file__).resolve().parents[1]

CONSTANT_SOURCE = '''import torch
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


@lru_cache(maxsize=None)
def _tasks(count: int, seed: int) -> tuple[SynthesizedTask, ...]:
    return tuple(synthesize(count, seed=seed))


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, shared_judge):
    """The real CPU judge (the session's, tests/conftest.py): synthesized tasks are probed in its sandboxed worker,
    as the server does."""
    application = App(Settings(home=tmp_path_factory.mktemp("home"), device="cpu"), judge=shared_judge)
    yield application
    application.store.close()  # the judge is the session's


def test_reproducible_and_seed_dependent():
    a = _tasks(20, 11)
    b = synthesize(20, seed=11)
    assert [t.source for t in a] == [t.source for t in b]
    assert [t.name for t in a] == [t.name for t in b]
    c = synthesize(5, seed=12, validate=False)
    assert [t.source for t in c] != [t.source for t in a[:5]]


def test_twenty_tasks_well_formed_and_in_format():
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
        assert format_problem(t) is None, t.name


def test_a_malformed_source_is_caught_statically():
    good = _tasks(20, 11)[0]
    assert "get_inputs" in format_problem(SynthesizedTask("bad", "x = 1\n", {}, "d", ("x",)))
    assert "not top-level integer constants" in format_problem(
        SynthesizedTask("bad", good.source, {"no_such_constant": 2}, "d", good.ops))


def test_synthesis_never_runs_the_generated_code():
    """Every emitted source imports torch, so a synthesis that leaves torch unimported executed none of them."""
    code = ("import sys; from adaexplore_mcp.tasks.synthesis import synthesize; "
            "tasks = synthesize(20, seed=11); assert len(tasks) == 20; "
            "assert 'torch' not in sys.modules, 'synthesis imported torch'; print('ok')")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


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


# slow: probes four synthesized tasks, 27 s; the probe dropping a degenerate task:
# test_a_constant_reference_is_rejected_by_the_probe
@pytest.mark.slow
def test_the_worker_probe_drops_a_degenerate_synthesized_candidate(app: App):
    # synthesize_tasks(2, 37) draws synthesize(4, 37); its first candidate ends in log_softmax -> relu -> tanh,
    # which is zero everywhere (log_softmax <= 0), so an all-zeros tensor passes on every input.
    candidates = synthesize(4, seed=37)
    degenerate = candidates[0]
    assert degenerate.ops[-3:] == ("log_softmax", "relu", "tanh")
    kept = app.synthesize_tasks(2, 37)
    assert [t.name for t in kept] == [candidates[1].name, candidates[2].name]
    assert all(t.origin == "synthesized" and not t.degenerate for t in kept)
    probed = app.tasks.find(degenerate.name, degenerate.source, degenerate.small_shapes)
    assert probed is not None and probed.degenerate  # registered, flagged by the worker, not handed out
    assert any(w.startswith("degenerate:") and "all-zeros" in w for w in probed.warnings), probed.warnings


def test_a_constant_reference_is_rejected_by_the_probe(app: App, monkeypatch: pytest.MonkeyPatch):
    good = _tasks(20, 11)[0]
    constant = SynthesizedTask("syn_constant", CONSTANT_SOURCE, {"batch_size": 4}, "d", ("x",))
    monkeypatch.setattr("adaexplore_mcp.tasks.synthesis.synthesize", lambda count, seed: [constant, good])
    kept = app.synthesize_tasks(1, 0)
    assert [t.name for t in kept] == [good.name]
    probed = app.tasks.find(constant.name, constant.source, constant.small_shapes)
    assert probed is not None and probed.degenerate
    assert any("constant" in w for w in probed.warnings), probed.warnings
