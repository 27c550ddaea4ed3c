"""The built-in task library: KernelBench format, loads unchanged, runs small, not degenerate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from adaexplore_mcp.tasks.format import check_small_shapes, check_static, import_file, integer_constants
from adaexplore_mcp.tasks.library import BUILTIN_DIR, builtin_task, builtin_tasks
from devtools.task_checks import nondegeneracy_problem, probe_shapes

TASKS = builtin_tasks()


def test_manifest_lists_at_least_14_distinct_tasks():
    names = [t.name for t in TASKS]
    assert len(names) >= 14 and len(set(names)) == len(names)
    entries = json.loads((BUILTIN_DIR / "manifest.json").read_text())
    assert [e["name"] for e in entries] == names
    assert builtin_task("layernorm").name == "layernorm"
    with pytest.raises(KeyError):
        builtin_task("no_such_task")


@pytest.mark.parametrize("task", TASKS, ids=[t.name for t in TASKS])
def test_builtin_task_format(task, tmp_path: Path):
    assert task.source == (BUILTIN_DIR / task.file).read_text()  # unchanged file text
    check_static(task.source, max_bytes=1 << 20)
    check_small_shapes(task.source, task.small_shapes)
    consts = integer_constants(task.source)
    assert consts and task.description
    for k, v in task.small_shapes.items():
        assert v <= consts[k]
    path = tmp_path / f"{task.name}.py"
    path.write_text(task.source)
    module = import_file(f"builtin_{task.name}", path)  # loads unchanged as a module
    for name in ("Model", "get_inputs", "get_init_inputs"):
        assert hasattr(module, name)
    for k, v in task.small_shapes.items():
        setattr(module, k, v)
    model = module.Model(*module.get_init_inputs()).eval()
    inputs = module.get_inputs()
    assert all(isinstance(x, torch.Tensor) and x.device.type == "cpu" for x in inputs)
    with torch.no_grad():
        out = model(*inputs)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32 and torch.isfinite(out).all()


@pytest.mark.parametrize("task", TASKS, ids=[t.name for t in TASKS])
def test_builtin_task_not_degenerate(task, tmp_path: Path):
    path = tmp_path / f"{task.name}.py"
    path.write_text(task.source)
    # at small shapes, and at full feature sizes with a tiny batch (where reductions bite)
    for shapes in (task.small_shapes, probe_shapes(task.source)):
        module = import_file(f"builtin_nd_{task.name}", path)
        assert nondegeneracy_problem(module, shapes) is None, shapes
