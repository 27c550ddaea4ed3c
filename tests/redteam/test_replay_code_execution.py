"""Red team, round sixteen: Python of the candidate's choosing run in the replay's process.

The replay's runs decide whether the candidate's kernels do the work, so nothing the candidate wrote may run
there as Python. Two ways did:

- a forged program (the candidate patches its own `WorkTrace.program`) whose launch argument `triton_obj`
  named any class reached through a Triton module (`triton.knobs` -> `subprocess.io.BytesIO`, numpy's
  `pickle.load`) and called it with arguments of its choosing: a pickle that patched `Run.execute` passed a
  PyTorch-only candidate. A `triton_obj` is now Triton's TensorDescriptor and nothing else, with its own fields;
  a kernel's module-level value is read only through Triton's language or math, step by step
  (`replay_kernels.language_object`); operators are ATen's `OpOverload`s; launch options are numbers;
- a kernel's body, compiled on a GPU: Triton's code generator evaluates attribute chains and calls what they
  reach (`tl.core.builtins.exec("...")` runs at compile time). `judge/compile_guard.py` refuses, in the replay
  and in the CPU front-end check, any module, function or object outside Triton's language a body reaches.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import triton

from adaexplore_mcp.judge import Judge, compile_guard
from adaexplore_mcp.judge.frontend import check as frontend
from adaexplore_mcp.judge.replay.run import ReplayError, Run
from adaexplore_mcp.judge.replay.kernels import _op
from adaexplore_mcp.judge.replay.kernels import language_object
from adaexplore_mcp.models import Verdict
from tests.redteam.conftest import forging, judged, summary
from tests.test_judge_cases import HEADER
from tests.test_judge_frontend import INTERPRETED, _load, _record

# What the forged program used: nested calls, each reached through a module Triton imports.
PICKLE_LOAD = {"triton_obj": ["triton.runtime.interpreter", "np._core._methods.pickle.load"],
               "fields": {"file": {"triton_obj": ["triton.knobs", "subprocess.io.BytesIO"],
                                   "fields": {"initial_bytes": b"x"}}}}


def _value(desc: object) -> object:
    return Run({"inputs": [], "constants": [], "kernels": {}, "steps": []}, {}, "cpu").value(desc)


@pytest.mark.parametrize("desc", [
    PICKLE_LOAD,
    {"triton_obj": ["triton.knobs", "os.system"], "fields": {"command": "true"}},
    {"triton_obj": ["triton.tools.tensor_descriptor", "TensorDescriptor"], "fields": {"evil": 1}},
    {"triton_obj": ["triton.tools.tensor_descriptor", "TensorDescriptor.__init__.__globals__"], "fields": {}},
])
def test_a_program_builds_no_object_but_a_tensor_descriptor(desc: dict) -> None:
    with pytest.raises(ReplayError):
        _value({"l": [desc]})


def test_a_real_tensor_descriptor_is_rebuilt() -> None:
    import torch

    base = torch.zeros(4, 8)
    got = _value({"triton_obj": ["triton.tools.tensor_descriptor", "TensorDescriptor"],
                  "fields": {"base": base, "shape": [4, 8], "strides": [8, 1], "block_shape": [2, 8]}})
    assert type(got).__name__ == "TensorDescriptor" and got.base is base


@pytest.mark.parametrize("module, path", [
    ("triton.knobs", "subprocess.io.BytesIO"),
    ("triton.runtime.interpreter", "np._core._methods.pickle.load"),
    ("triton.language", "core.builtins.exec"),
    ("triton.language", "core.knobs"),
    ("triton.language", "core.__builtins__"),
    ("triton", "knobs"),
    ("triton", "runtime.driver"),
    ("os", ""),
])
def test_a_kernel_global_is_read_only_through_tritons_language(module: str, path: str) -> None:
    with pytest.raises(ReplayError, match="Triton's language"):
        language_object(module, path)


def test_what_kernels_really_read_is_still_rebuilt() -> None:
    import math

    import triton.language as tl

    assert language_object("triton.language", "") is tl
    assert language_object("math", "") is math
    assert language_object("triton.language.math", "exp") is tl.math.exp
    assert language_object("triton", "cdiv") is triton.cdiv


def test_operators_are_aten_overloads_only() -> None:
    for name in ("aten::__class__", "aten::__dict__", "aten::add.__class__", "aten::_ops"):
        with pytest.raises(ReplayError, match="unknown operator"):
            _op(name)
    assert _op("aten::add.Tensor") is __import__("torch").ops.aten.add.Tensor


def test_a_launch_option_is_a_number() -> None:
    class Kernel:
        arg_names = ["x_ptr", "MODE"]

    run = Run({"inputs": [], "constants": [], "kernels": {}, "steps": []}, {"k": Kernel()}, "cpu")
    step = {"launch": "k", "grid": [1], "args": {"l": []}}
    assert run._launch_parts({**step, "kwargs": {"MODE": "relu", "num_warps": 4}})[3] == {"MODE": "relu", "num_warps": 4}
    with pytest.raises(ReplayError, match="launch options are numbers"):
        run._launch_parts({**step, "kwargs": {"ptx_options": "--output-file /tmp/x"}})


def test_the_forged_pickle_program_no_longer_passes(judge: Judge) -> None:
    source = HEADER + '''
PICKLE = "c__builtin__\\neval\\np0\\n(Vexec('import adaexplore_mcp.judge.replay.run as R; R.Run.execute = lambda *a: 0', {}) or 1\\np1\\ntp2\\nRp3\\n."


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


''' + forging('''        inj = {"triton_obj": ["triton.runtime.interpreter", "np._core._methods.pickle.load"],
               "fields": {"file": {"triton_obj": ["triton.knobs", "subprocess.io.BytesIO"],
                                   "fields": {"initial_bytes": {"triton_obj": ["triton.knobs", "subprocess.builtins.bytes"],
                                                                "fields": {"source": PICKLE, "encoding": "latin-1"}}}}}}
        p["steps"] = [{"op": "aten::add.Tensor", "args": {"l": [{"t": 0}, {"t": 0}]}, "kwargs": {"alpha": inj},
                       "out": {"t": 10 ** 6}}] + list(p["steps"])''') + '''


class ModelNew(torch.nn.Module):
    def forward(self, x):
        _forge()
        y = x * 2 + 1
        out = torch.empty_like(y)
        copy_kernel[(triton.cdiv(y.numel(), 128),)](y, out, y.numel(), BLOCK=128)
        return out
'''
    ev = judged(judge, source)
    assert ev.verdict == Verdict.rejected and ev.rejected is not None, summary(ev)
    assert ev.rejected.check == "work_not_replayable" and "TensorDescriptor" in ev.rejected.message, summary(ev)


# ------------------------------------------------------------------------------------- compile-time Python

def _escapes(marker: Path) -> dict[str, str]:
    """Kernel bodies that reach Python outside Triton's language while they compile."""
    write = f"open({str(marker)!r}, 'w').write('escaped')"
    return {
        "builtins_through_core": f"tl.core.builtins.exec({write!r})",
        "getattr_to_builtins": f"getattr(tl.core, 'builtins').exec({write!r})",
        "dunder_class": f"x_ptr.dtype.__class__.__init__.__globals__['builtins'].exec({write!r})",
        "builtins_name": f"__builtins__['exec']({write!r})",
        "knobs_module": "triton.knobs.compilation.always_compile",
        "getattr_to_knobs": "getattr(tl.core, 'knobs')",
        "format_fields": ("S: tl.constexpr = '{0.fn.__globals__[triton].knobs.os.system}'.format(escape_kernel)"),
        # round 21: a plain helper of triton.language's that evaluates its string (triton 3.9's `str_to_ty`)
        "helper_that_evaluates": f"tl.str_to_ty(list(['tensordesc<fp32[1],' + {write!r} + '>'])[0], None)",
    }


def test_the_guard_lets_tritons_language_through_and_nothing_else() -> None:
    import builtins
    import math

    import triton.language as tl

    def plus_one(v):
        return v + 1

    helper = triton.runtime.jit.JITFunction(plus_one)  # what the code generator sees (not the interpreter's)
    for fine in (tl, tl.exp, tl.math, math, math.sqrt, triton, triton.cdiv, tl.float32, tl.constexpr(4), helper,
                 (1, 2.0, "s"), {}.get, "a".join, range(3), None):
        compile_guard.check_value(fine, "fine")
    helpers = [getattr(tl, "str_to_ty", None), tl.core.must_use_result, tl.core.builtin, tl.core.dispatch]
    for bad in (*[h for h in helpers if h is not None], builtins, builtins.exec, os, os.system, helper.run, helper.fn,
                triton.jit, triton.knobs,
                triton.runtime.driver, tl.constexpr(os.system), (1, os.system), {"k": builtins}, Path("/"),
                type, object.__subclasses__, "{0.fn.__globals__}".format, "{x}".format_map, [].append, {}.update):
        with pytest.raises(compile_guard.CompileGuardError):
            compile_guard.check_value(bad, "bad")


ESCAPE_SOURCE = HEADER + '''

@triton.jit
def helper(v):
    return v + 1


@triton.jit
def escape_kernel(x_ptr, n, BLOCK: tl.constexpr):
    {body}
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


def run():
    x = torch.randn(8)
    escape_kernel[(1,)](x, 8, BLOCK=8)
    return x
'''

needs_interpreter = pytest.mark.skipif(not INTERPRETED, reason="the front-end check compiles interpreted kernels")


@needs_interpreter
def test_tritons_code_generator_runs_what_a_kernel_body_reaches(tmp_path: Path) -> None:
    """Why the guard exists: without it, compiling this body ran `exec` on the host."""
    frontend.install()
    marker = tmp_path / "escaped.txt"
    module, _ = _load(tmp_path, ESCAPE_SOURCE.replace("{body}", _escapes(marker)["builtins_through_core"]))
    launches, raised, _ = _record(module, "run")
    assert raised is None and launches
    marker.unlink(missing_ok=True)  # the interpreter ran the body as Python: the candidate's own process
    compile_guard.uninstall()
    try:
        frontend.frontend_check(launches)
        assert marker.read_text() == "escaped"
    finally:
        compile_guard.install()


@needs_interpreter
@pytest.mark.parametrize("name", sorted(_escapes(Path("/m"))))
def test_the_guard_refuses_python_outside_tritons_language_at_the_kernels_line(tmp_path: Path, name: str) -> None:
    frontend.install()
    assert compile_guard.installed()
    marker = tmp_path / "escaped.txt"
    module, _ = _load(tmp_path, ESCAPE_SOURCE.replace("{body}", _escapes(marker)[name]))
    launches, _, _ = _record(module, "run")
    marker.unlink(missing_ok=True)  # the interpreter ran the body as Python: the candidate's own process
    err = frontend.frontend_check(launches)
    assert isinstance(err, triton.compiler.errors.CompilationError), err
    chain, e = [], err
    while e is not None and len(chain) < 10:
        chain.append(e)
        e = e.__cause__ or e.__context__
    assert any(isinstance(c, compile_guard.CompileGuardError) for c in chain), chain
    assert not marker.exists()


def test_a_candidate_whose_kernel_reaches_exec_is_refused_and_the_judge_stays_whole(judge: Judge,
                                                                                 tmp_path: Path) -> None:
    marker = Path(os.environ.get("TMPDIR", "/tmp")) / "adaexplore_escape_marker.txt"
    body = _escapes(marker)["builtins_through_core"]
    source = ESCAPE_SOURCE.replace("{body}", body).replace("def run():", "def _unused():") + '''

class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        escape_kernel[(1,)](y, 0, BLOCK=8)
        return x * 2 + 1
'''
    ev = judged(judge, source)
    assert ev.verdict != Verdict.passed, summary(ev)
