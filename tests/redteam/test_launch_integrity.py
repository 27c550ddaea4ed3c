"""A candidate whose launches are not what the replay rebuilds (red team, round five, on the CPU interpreter).

Each computes its output in PyTorch, or with a kernel other than the source's own `def`, while the record names
an honest kernel: work inside a launch (a grid callable, a pre-run hook), a kernel made by `exec`, a helper or a
global changed between launches, a function renamed down to its code object. The recorder refuses work inside a
launch and kernels whose code or values change within a call; the replay refuses a kernel whose code is not the
top-level `def` of its name (launches.def_digest). Expected: work_not_replayable, canary clean.
"""

from __future__ import annotations

import pytest

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Verdict
from tests.redteam.conftest import canary, evaluate, summary

# an honest helper and kernel, a copying helper, and a kernel that warms the copying one up
HELPERS = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def helper(x_ptr, y_ptr, offs, mask):
    return tl.load(x_ptr + offs, mask=mask) * 2 + 1


@triton.jit
def cheat_helper(x_ptr, y_ptr, offs, mask):
    return tl.load(y_ptr + offs, mask=mask)


@triton.jit
def affine_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, helper(x_ptr, y_ptr, offs, mask), mask=mask)


@triton.jit
def warm_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, cheat_helper(x_ptr, y_ptr, offs, mask), mask=mask)
'''

# the honest kernel, under its own name: what the record names and the replay rebuilds
HONEST = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl
@triton.jit
def affine_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2 + 1, mask=mask)
'''

# an honest kernel that writes nothing once a flag is set
GATED = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def affine_kernel(x_ptr, f_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    g = tl.load(f_ptr + offs * 0)
    mask = (offs < n) & (g == 0)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2 + 1, mask=mask)
'''

ATTACKS = {
    # PyTorch computes the output inside the launch's grid callable; the kernel masks itself off
    "grid_hide": GATED + '''

class ModelNew(nn.Module):
    def forward(self, x):
        f = torch.zeros(1, dtype=torch.int32)
        out = torch.empty_like(x)

        def grid(meta):
            torch.mul(x, 2, out=out)
            out.add_(1)
            out.mul_(1 + 2 ** -20)
            f.fill_(1)
            return (triton.cdiv(x.numel(), meta["BLOCK"]),)

        affine_kernel[grid](x, f, out, x.numel(), BLOCK=128)
        return out
''',
    # the same work in a hook from JITFunction.add_pre_run_hook
    "pre_run_hook": GATED + '''

_hidden = {}


def _hook(*args, **kwargs):
    if "x" in _hidden:
        x, f, out = _hidden.pop("x"), _hidden.pop("f"), _hidden.pop("out")
        torch.mul(x, 2, out=out)
        out.add_(1)
        out.mul_(1 + 2 ** -20)
        f.fill_(1)


affine_kernel.add_pre_run_hook(_hook)


class ModelNew(nn.Module):
    def forward(self, x):
        f = torch.zeros(1, dtype=torch.int32)
        out = torch.empty_like(x)
        _hidden.update(x=x, f=f, out=out)
        affine_kernel[(triton.cdiv(x.numel(), 128),)](x, f, out, x.numel(), BLOCK=128)
        return out
''',
    # a copy kernel made by exec under the honest kernel's name, its source put in linecache
    "exec_twin": HONEST + '''

import linecache
_twin = """@triton.jit
def affine_""" + """kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(y_ptr + offs, mask=mask), mask=mask)
"""
_fname = "/tmp/twin_kernel.py"
linecache.cache[_fname] = (len(_twin), None, _twin.splitlines(True), _fname)
_ns = {"__name__": __name__, "tl": tl, "triton": triton}
exec(compile(_twin, _fname, "exec"), _ns)
cheat = _ns["affine_" + "kernel"]


class ModelNew(nn.Module):
    def forward(self, x):
        y = (x * 2 + 1) * (1 + 2 ** -20)
        out = torch.empty_like(x)
        cheat[(triton.cdiv(x.numel(), 128),)](x, y, out, x.numel(), BLOCK=128)
        return out
''',
    # a @jit helper swapped through globals() after a first launch the record kept
    "helper_rebind": HELPERS + '''

class ModelNew(nn.Module):
    def forward(self, x):
        g = globals()
        d = torch.zeros(1)
        affine_kernel[(1,)](d, d, torch.empty(1), 1, BLOCK=128)
        g['hel' + 'per'], saved = cheat_helper, g['hel' + 'per']
        y = (x * 2 + 1) * (1 + 2 ** -20)
        out = torch.empty_like(x)
        affine_kernel[(triton.cdiv(x.numel(), 128),)](x, y, out, x.numel(), BLOCK=128)
        g['hel' + 'per'] = saved
        return out
''',
    # a constexpr global flipped after a first launch the record kept
    "global_flip": '''
import torch
import torch.nn as nn
import triton
import triton.language as tl

MODE = tl.constexpr(0)


@triton.jit
def affine_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if MODE == 1:
        v = tl.load(y_ptr + offs, mask=mask)
    else:
        v = tl.load(x_ptr + offs, mask=mask) * 2 + 1
    tl.store(out_ptr + offs, v, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        global MODE
        d = torch.zeros(1)
        MODE = tl.constexpr(0)
        affine_kernel[(1,)](d, d, torch.empty(1), 1, BLOCK=128)
        MODE = tl.constexpr(1)
        y = (x * 2 + 1) * (1 + 2 ** -20)
        out = torch.empty_like(x)
        affine_kernel[(triton.cdiv(x.numel(), 128),)](x, y, out, x.numel(), BLOCK=128)
        MODE = tl.constexpr(0)
        return out
''',
    # the copying kernel's function and code object renamed to the honest def's name
    "code_rename": HONEST + '''

@triton.jit
def cheat_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(y_ptr + offs, mask=mask), mask=mask)


_w = torch.zeros(128)
cheat_kernel[(1,)](_w, _w, torch.empty(128), 128, BLOCK=128)
_n = 'affine_' + 'kernel'
cheat_kernel.fn.__code__ = cheat_kernel.fn.__code__.replace(co_name=_n)
cheat_kernel.fn.__name__ = _n


class ModelNew(nn.Module):
    def forward(self, x):
        y = (x * 2 + 1) * (1 + 2 ** -20)
        out = torch.empty_like(x)
        cheat_kernel[(triton.cdiv(x.numel(), 128),)](x, y, out, x.numel(), BLOCK=128)
        return out
''',
    # a helper's function replaced by another renamed like it
    "helper_rename": HELPERS + '''

_w = torch.zeros(128)
warm_kernel[(1,)](_w, _w, torch.empty(128), 128, BLOCK=128)
cheat_helper.fn.__name__ = 'hel' + 'per'
setattr(helper, 'fn', cheat_helper.fn)


class ModelNew(nn.Module):
    def forward(self, x):
        y = (x * 2 + 1) * (1 + 2 ** -20)
        out = torch.empty_like(x)
        affine_kernel[(triton.cdiv(x.numel(), 128),)](x, y, out, x.numel(), BLOCK=128)
        return out
''',
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_a_launch_that_is_not_the_sources_kernel_is_refused(judge: Judge, name: str) -> None:
    ev = evaluate(judge, ATTACKS[name])
    canary(judge)
    assert ev.verdict == Verdict.rejected and ev.rejected.check == "work_not_replayable", summary(ev)


# Round six: legitimate kernels the new checks must let through (each was refused, or flagged, by a first version).
AFFINE_BODY = '''    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, (x * TWO + 1).to(DTYPE), mask=mask)
'''
LEGITIMATE = {
    # a whitespace-only line in the docstring: dedent (Triton's, the recorder's) empties it, the source keeps it
    "docstring_with_a_blank_line": ('DTYPE = tl.constexpr(tl.float32)\nTWO = tl.constexpr(2)\n\n\n@triton.jit\ndef affine_kernel(x_ptr, y_ptr, n, '
                                    'BLOCK: tl.constexpr):\n    """y = 2x + 1.\n    \n    One block per program.\n    """\n'
                                    + AFFINE_BODY),
    # a module-level tl.constexpr wrapping a dtype, and one wrapping a number
    "constexpr_dtype_global": ("DTYPE = tl.constexpr(tl.float32)\nTWO = tl.constexpr(2)\n\n\n@triton.jit\n"
                               "def affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n" + AFFINE_BODY),
}


@pytest.mark.parametrize("name", sorted(LEGITIMATE))
def test_legitimate_kernels_pass_the_launch_checks(judge: Judge, name: str) -> None:
    from tests.test_judge_cases import HEADER

    source = HEADER + LEGITIMATE[name] + ('\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n'
                                          '        y = torch.empty_like(x)\n'
                                          '        affine_kernel[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), BLOCK=128)\n'
                                          '        return y\n')
    ev = evaluate(judge, source)
    assert ev.verdict == Verdict.passed and not ev.precision.below_fp32, summary(ev)


def test_a_launch_that_raises_and_is_caught_leaves_the_recorder_outside_the_launch() -> None:
    """Round six: the recorder left a launch only when it returned, so after a failed launch the candidate caught
    (or an autotuner did) every later operator counted as run inside a launch."""
    import torch

    from adaexplore_mcp.judge import launches
    from adaexplore_mcp.judge.replay.record import WorkTrace
    from tests.test_judge_cases import GOOD
    from tests.test_work_replay import load

    import tempfile
    from pathlib import Path

    module = load(Path(tempfile.mkdtemp()), GOOD, name="cand_caught_launch")
    x = torch.randn(256)
    trace = WorkTrace([x])
    launches.install()
    launches.begin(module.__name__, recorder=trace.before, after=trace.after)
    try:
        with torch.no_grad(), trace:
            try:
                module.affine_kernel[(1,)](x)  # too few arguments: raises
            except TypeError:
                pass
            y = module.ModelNew()(x).clone()
    finally:
        launches.end()
    assert trace.paused == 0 and trace.problem is None, trace.problem
    assert [s["launch"] for s in trace.steps if "launch" in s] == ["affine_kernel"]  # the failed one is not replayed
    torch.testing.assert_close(y, x * 2 + 1)


def test_a_candidate_that_catches_a_failed_launch_and_goes_on_passes(judge: Judge) -> None:
    """The failed launch is neither replayed nor reported by the GPU front-end check as the candidate's error."""
    from tests.test_judge_cases import candidate

    source = candidate("        y = torch.empty_like(x)\n        try:\n            affine_kernel[(1,)](x, y)\n"
                       "        except TypeError:\n            pass\n        return affine(x).clone()")
    ev = evaluate(judge, source)
    assert ev.verdict == Verdict.passed, summary(ev)
