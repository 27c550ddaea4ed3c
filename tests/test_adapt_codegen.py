"""The Adapt loop's first-draft kernel writer (bench/adapt/codegen.py): deterministic, well-formed, and
able to write kernels that pass the judge (CPU interpreter)."""

from __future__ import annotations

import ast
import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from adaexplore_mcp.tasks.synthesis import synthesize  # noqa: E402
from bench.adapt.codegen import draft_kernels  # noqa: E402
from bench.adapt.layouts import segments  # noqa: E402
from bench.adapt.parse import parse_task  # noqa: E402


@pytest.fixture(scope="module")
def tasks():
    return synthesize(8, 3, validate=False)


def _init_args(source: str, cls_name: str) -> list[str]:
    cls = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == cls_name)
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    return [a.arg for a in init.args.args]


def test_deterministic_for_a_seed(tasks):
    for t in tasks:
        a = draft_kernels(t, random.Random(7), 3)
        b = draft_kernels((t.ops, t.source), random.Random(7), 3)
        assert a == b
    assert any(draft_kernels(t, random.Random(1), 3) != draft_kernels(t, random.Random(2), 3) for t in tasks)


def test_drafts_parse_and_mirror_model_init(tasks):
    for t in tasks:
        for src in draft_kernels(t, random.Random(0), 4):
            tree = ast.parse(src)
            assert any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body)
            assert _init_args(src, "ModelNew") == _init_args(t.source, "Model")
            assert "@triton.jit" in src
            # the reference's parameter assignments are copied verbatim (weights copy by name)
            for line in t.source.splitlines():
                if line.strip().startswith("self.") and "=" in line:
                    assert line.strip() in src


def test_every_op_is_parsed_and_segmented(tasks):
    for t in tasks:
        parsed = parse_task(t.source)
        tail = [op.name for op in parsed.ops]
        expected = [o for o in t.ops[1:]]
        if t.ops[0].startswith("pointwise_"):
            expected = [t.ops[0].removeprefix("pointwise_")] + expected
        assert tail == expected
        assert [op.name for _, ops in segments(parsed.ops) for op in ops] == tail


# slow: the bench tool's drafts against the real judge on one task, 40 s on two busy cores; legitimate kernels
# passing is tests/fidelity's
@pytest.mark.slow
def test_some_draft_passes_the_judge(tmp_path):
    from adaexplore_mcp.app import App
    from adaexplore_mcp.config import JudgeLimits, Settings

    # a head the drafts leave to PyTorch (a conv, a pooling; a matmul in half of the drafts) is library fallback
    # under the work policy: a task whose matmul head some drafts write in Triton
    simple = [t for t in synthesize(8, 11) if t.ops[0] in ("linear", "matmul")][:1]  # matmul/hardswish/clamp/sum
    assert len(simple) == 1
    app = App(Settings(home=tmp_path, device="cpu", limits=JudgeLimits(trials=2)))
    try:
        for t in simple:
            info, _ = app.create_task(t.name, t.source, t.small_shapes, origin="synthesized")
            verdicts = [app.evaluate_kernel(info.task_id, src).verdict.value
                        for src in draft_kernels(t, random.Random(0), 5)]
            assert "passed" in verdicts, (t.name, verdicts)
    finally:
        app.close()


def test_distill_templates_and_fallback():
    from adaexplore_mcp.memory.rules import validate_text
    from adaexplore_mcp.memory.types import ClusterExample, FailureCluster
    from bench.adapt_loop import distill

    def cluster(sig, err, line):
        return FailureCluster(cluster_id="c_x", signature=sig, count=3, tasks=["a", "b"], ripe=True,
                              examples=[ClusterExample(task_id="a", error_line=err, source_line=line)])

    text, how = distill(cluster("CompilationError: module 'triton.language.math' has no attribute <name>",
                                "AttributeError: module 'triton.language.math' has no attribute 'tanh'",
                                "x = tl.math.tanh(x)"))
    assert how == "template" and "tl.math" in text
    text, how = distill(cluster("CompilationError: some brand new <n> message", "ValueError: some brand new 3 message",
                                "y = tl.frobnicate(x)"))
    assert how == "fallback"
    for t in (text,):
        assert validate_text(t)
