"""The exported best kernel is one importable KernelBench file: ModelNew next to the task's reference."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

from adaexplore_mcp.export import KernelFileError, KernelMeta, standalone_kernel_file

REFERENCE = textwrap.dedent('''\
    """Scaled ReLU (a KernelBench-style problem)."""
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def __init__(self, scale: float):
            super().__init__()
            self.scale = scale

        def forward(self, x):
            return torch.relu(x) * self.scale


    batch_size = 4
    dim = 96


    def get_inputs():
        return [torch.randn(batch_size, dim)]


    def get_init_inputs():
        return [2.0]
    ''')

KERNEL = textwrap.dedent('''\
    from __future__ import annotations

    import torch
    import torch.nn as nn
    import triton
    import triton.language as tl

    batch_size = 4096  # the candidate's own copy: the reference's value must win


    @triton.jit
    def relu_scale_kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(y_ptr + offs, tl.maximum(x, 0.0) * scale, mask=mask)


    class Model(nn.Module):  # a copy of the reference some assistants paste in
        pass


    class ModelNew(nn.Module):
        def __init__(self, scale: float):
            super().__init__()
            self.scale = scale

        def forward(self, x):
            x = x.contiguous()
            y = torch.empty_like(x)
            n = x.numel()
            relu_scale_kernel[(triton.cdiv(n, 128),)](x, y, n, self.scale, BLOCK=128)
            return y


    def get_inputs():
        return []
    ''')

META = {"task": "relu_scale", "speedup": 2.345, "gpu": "NVIDIA H200", "date": "2026-12-02",
        "search_id": "s-123", "node_id": "17", "strategy": "adaexplore"}


def _write_and_import(tmp_path, text: str, name: str = "exported_kernel"):
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return path, module


def test_the_file_parses_imports_and_defines_modelnew_and_the_reference_inputs(tmp_path):
    text = standalone_kernel_file(REFERENCE, KERNEL, META)
    ast.parse(text)
    _, module = _write_and_import(tmp_path, text)
    for name in ("ModelNew", "Model", "get_inputs", "get_init_inputs", "relu_scale_kernel"):
        assert hasattr(module, name), name
    model = module.ModelNew(*module.get_init_inputs())
    assert model.scale == 2.0
    (x,) = module.get_inputs()
    assert tuple(x.shape) == (4, 96)  # the reference's constants and get_inputs hold
    reference = module.Model(*module.get_init_inputs())
    assert reference.scale == 2.0 and hasattr(reference, "forward")


def test_the_header_names_task_speedup_gpu_date_and_search():
    text = standalone_kernel_file(REFERENCE, KERNEL, META)
    header = text.split("\n\n")[0]
    assert header.startswith("# adaexplore-mcp: best kernel for task relu_scale")
    assert "2.35x" in header and "NVIDIA H200" in header and "2026-12-02" in header
    assert "search s-123" in header and "node 17" in header


def test_future_imports_come_first_and_the_candidates_duplicates_are_dropped():
    text = standalone_kernel_file(REFERENCE, KERNEL, KernelMeta(task="t"))
    tree = ast.parse(text)
    first = tree.body[0]
    assert isinstance(first, ast.ImportFrom) and first.module == "__future__"
    defined = [getattr(n, "name", None) for n in tree.body]
    assert defined.count("Model") == 1 and defined.count("get_inputs") == 1
    assert "batch_size = 4096" not in text
    assert "removed: the reference's definitions above hold" in text


def test_without_a_speedup_the_header_says_not_timed():
    text = standalone_kernel_file(REFERENCE, KERNEL, {"task": "relu_scale", "speedup": None})
    assert "not timed" in text.split("\n\n")[0]


@pytest.mark.parametrize(
    ("reference", "kernel", "message"),
    [
        (REFERENCE, "import torch\nclass Model: pass\n", "ModelNew"),
        ("class Model: pass\n", KERNEL, "get_inputs"),
        (REFERENCE, "class ModelNew(:\n", "does not parse"),
    ],
)
def test_unusable_sources_raise_a_clear_error(reference, kernel, message):
    with pytest.raises(KernelFileError, match=message):
        standalone_kernel_file(reference, kernel, META)


def test_the_exported_kernel_runs_and_matches_the_reference_under_the_interpreter(tmp_path):
    path = tmp_path / "exported.py"
    path.write_text(standalone_kernel_file(REFERENCE, KERNEL, META))
    check = textwrap.dedent(f"""
        import importlib.util, torch
        spec = importlib.util.spec_from_file_location("exported", {str(path)!r})
        m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
        torch.manual_seed(0)
        inputs = m.get_inputs()
        got = m.ModelNew(*m.get_init_inputs())(*inputs)
        want = m.Model(*m.get_init_inputs())(*inputs)
        torch.testing.assert_close(got, want)
        print("ok")
    """)
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr[-2000:]
