"""In-process checks of a task's reference (plain PyTorch): for tests and GPU scripts, never the server.

The server decides degeneracy in a judge worker (`adaexplore_mcp.judge.probe`); tests use these to
assert that the built-in library is not degenerate at small shapes and at full feature sizes, and
`tests/test_tasks_gpu.py` to probe synthesized tasks at full size on a GPU, without a judge.
"""

from __future__ import annotations

import types

from adaexplore_mcp.tasks.synthesis_checks import probe_shapes

__all__ = ["load_source", "nondegeneracy_problem", "probe_shapes"]


def load_source(source: str, name: str = "synth_task") -> types.ModuleType:
    """Execute a reference source into a fresh module (plain PyTorch: no file needed)."""
    module = types.ModuleType(name)
    module.__file__ = f"<{name}>"
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    return module


def nondegeneracy_problem(module: types.ModuleType, small_shapes: dict[str, int] | None,
                          atol: float = 1e-2, rtol: float = 1e-2, seeds: tuple[int, ...] = (1, 2)) -> str | None:
    """Run the reference on several input seeds; return why it is degenerate, or None if fine.

    Degenerate: an error, no tensor output, non-finite values, outputs that do not change with the
    inputs, or outputs that a constant tensor (zeros, or the output's mean) would match within
    |out - c| <= atol + rtol*|out| everywhere.
    """
    import torch

    for k, v in (small_shapes or {}).items():
        setattr(module, k, v)
    torch.manual_seed(0)
    try:
        model = module.Model(*module.get_init_inputs()).eval()
    except Exception as exc:  # noqa: BLE001 - report any construction error
        return f"Model(*get_init_inputs()) failed: {type(exc).__name__}: {exc}"
    outs = []
    for seed in seeds:
        torch.manual_seed(seed)
        try:
            inputs = module.get_inputs()
            with torch.no_grad():
                out = model(*inputs)
        except Exception as exc:  # noqa: BLE001
            return f"forward failed: {type(exc).__name__}: {exc}"
        if not isinstance(out, torch.Tensor):
            return f"forward returned {type(out).__name__}, not a tensor"
        if out.numel() == 0:
            return "empty output"
        if not out.is_floating_point():
            return f"output dtype {out.dtype} is not floating point"
        o = out.float()
        if not torch.isfinite(o).all():
            return "non-finite values in the output"
        tol = atol + rtol * o.abs()
        if bool(((o - 0.0).abs() <= tol).all()):
            return "an all-zeros output would pass the tolerance"
        if bool(((o - o.mean()).abs() <= tol).all()):
            return "a constant output (its mean) would pass the tolerance"
        outs.append(o)
    for other in outs[1:]:
        if other.shape == outs[0].shape and bool(((other - outs[0]).abs() <= atol + rtol * outs[0].abs()).all()):
            return "the output does not change with the inputs"
    return None
