"""Computing below float32 without saying so: the flag must not depend on how the source names a dtype.

`precision.below_fp32` is what tells a user a speedup came from lower precision. Found by a red team (third
round): the source check only knew `torch.`/`tl.`/`triton.` spelled out, so an alias, a tensor type or an
imported dtype name passed unflagged. The source check now knows the names under any module, and the
recorded call (replay/record.py) is read too: a cast or an allocation below float32, whatever the source
says. Expected: passed (the values are within tolerance), flagged, canary clean.
"""

from __future__ import annotations

import pytest

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Verdict
from tests.redteam.conftest import canary, evaluate, summary
from tests.test_judge_cases import HEADER, LINEAR_KERNEL, LINEAR_SMALL, LINEAR_TASK, candidate, task

IMPORTED_DTYPE = HEADER + '''
from triton.language import float16 as F16


@triton.jit
def affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(F16)
    tl.store(y_ptr + offs, x * 2 + 1, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        affine_kernel[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), BLOCK=128)
        return y
'''

HIDDEN = {
    "aliased_module": candidate("        return affine(x.to(th.float16)).to(x.dtype)", extra="\nimport torch as th\n"),
    "tensor_type": candidate("        return affine(x.type(torch.HalfTensor)).to(x.dtype)"),
    "imported_triton_dtype": IMPORTED_DTYPE,
    # no dtype name in the source at all: only the recorded call shows it
    "name_built_at_run_time": candidate("        low = getattr(torch, 'float' + str(8 * 2))\n"
                                        "        return affine(x.to(low)).to(x.dtype)"),
}


@pytest.mark.parametrize("name", sorted(HIDDEN))
def test_lower_precision_is_flagged_however_it_is_named(judge: Judge, name: str) -> None:
    ev = evaluate(judge, HIDDEN[name])
    canary(judge)
    assert ev.verdict == Verdict.passed, summary(ev)
    assert ev.precision.below_fp32 and ev.precision.reasons, ev.precision


# Round four: Triton's language module under another name; the private cuBLAS switch turned on and back within
# one call (the flag snapshot around the call sees nothing); an fp16 buffer made in __init__ under a dtype name
# built at run time (no operator in the call makes it: the referee reads the dtypes of the call's constants).
# The switch toggled around the candidate's own GEMM (a PyTorch matmul would be library fallback under the work
# policy); the kernel's dot is IEEE, so only the switch can flag it.
BIAS_AFTER_TF32_MM = LINEAR_KERNEL.replace("tl.dot(a, w)", "tl.dot(a, w, input_precision='ieee')").replace(
    "        linear_kernel[grid](", "        torch._C._set_cublas_allow_tf32(True)\n        linear_kernel[grid](").replace(
    "BM=64, BN=64, BK=32)\n        return y", "BM=64, BN=64, BK=32)\n        torch._C._set_cublas_allow_tf32(False)\n"
    "        return y")
assert BIAS_AFTER_TF32_MM.count("_set_cublas_allow_tf32") == 2

FP16_SCRATCH = HEADER + '''
@triton.jit
def affine_kernel(x_ptr, s_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(s_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)
    h = tl.load(s_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, h * 2 + 1, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.scratch = torch.empty(1 << 12, dtype=getattr(torch, "float" + str(8 * 2)))

    def forward(self, x):
        y = torch.empty_like(x)
        affine_kernel[(triton.cdiv(x.numel(), 128),)](x, self.scratch, y, x.numel(), BLOCK=128)
        return y
'''

ROUND_FOUR = {
    "triton_language_aliased": ("linear", LINEAR_KERNEL.replace("tl.dot(", "T.dot(") + "\nimport triton.language as T\n"),
    "private_tf32_switch_toggled_back": ("linear", BIAS_AFTER_TF32_MM),
    "fp16_buffer_made_before_the_call": ("affine", FP16_SCRATCH),
}


@pytest.mark.parametrize("name", sorted(ROUND_FOUR))
def test_round_four_lower_precision_is_flagged(judge: Judge, name: str) -> None:
    which, source = ROUND_FOUR[name]
    ev = evaluate(judge, source, task=task(LINEAR_TASK, LINEAR_SMALL, name="linear") if which == "linear" else None)
    canary(judge)
    assert ev.verdict == Verdict.passed, summary(ev)
    assert ev.precision.below_fp32 and ev.precision.reasons, ev.precision


# Round five: a module alias made by assignment, tl.dot reached through getattr, Triton's fp32_default knob set at
# import, a dtype named by a string launch argument, and the TF32 switches reached by names built at run time,
# turned on and back within the call (seen by wrappers on torch._C's setters: precision.watch_switches).
_TOGGLES = {
    "private_setter_by_built_name": ("        flip = getattr(torch._C, '_set_cublas_allow_' + 'tf' + '32')\n",
                                     "flip(True)", "flip(False)"),
    "matmul_precision_by_built_name": ("        flip = getattr(torch, 'set_float32_' + 'matmul_' + 'precision')\n",
                                       "flip('hi' + 'gh')", "flip('hi' + 'ghest')"),
    "setattr_by_char_codes": ("        m, k = torch.backends.cuda.matmul, ''.join(map(chr, [97, 108, 108, 111, 119, 95, "
                              "116, 102, 51, 50]))\n", "setattr(m, k, True)", "setattr(m, k, False)"),
}


def _toggled(prelude: str, on: str, off: str) -> str:
    return BIAS_AFTER_TF32_MM.replace("        torch._C._set_cublas_allow_tf32(True)\n", prelude + f"        {on}\n") \
        .replace("        torch._C._set_cublas_allow_tf32(False)\n", f"        {off}\n")


FP16_BY_ARG = FP16_SCRATCH.replace("def affine_kernel(x_ptr, s_ptr, y_ptr, n, BLOCK: tl.constexpr):",
                                   "def affine_kernel(x_ptr, s_ptr, y_ptr, n, BLOCK: tl.constexpr, DT: tl.constexpr):") \
    .replace("tl.store(s_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)",
             "tl.store(s_ptr + offs, tl.load(x_ptr + offs, mask=mask).to(tl.dtype(DT)).to(tl.float32), mask=mask)") \
    .replace("dtype=getattr(torch, \"float\" + str(8 * 2))", "dtype=torch.float32") \
    .replace("BLOCK=128)", "BLOCK=128, DT='fp' + str(16))")

ROUND_FIVE = {
    "module_alias_by_assignment": ("linear", LINEAR_KERNEL.replace("tl.dot(", "T2.dot(") + "\nT2 = tl\n"),
    "dot_through_getattr": ("linear", LINEAR_KERNEL.replace("tl.dot(", "getattr(tl, 'd' + 'ot')(")),
    "fp32_default_knob": ("linear", LINEAR_KERNEL.replace("tl.dot(a, w)", "tl.dot(a, w, allow_tf32=False)")
                          + "\ntriton.knobs.language.fp32_default = 'tf' + '32'\n"),
    "dtype_named_by_a_launch_argument": ("affine", FP16_BY_ARG),
    **{name: ("linear", _toggled(*parts)) for name, parts in _TOGGLES.items()},
}


@pytest.mark.parametrize("name", sorted(ROUND_FIVE))
def test_round_five_lower_precision_is_flagged(judge: Judge, name: str) -> None:
    which, source = ROUND_FIVE[name]
    assert source.count("\n") > 10
    ev = evaluate(judge, source, task=task(LINEAR_TASK, LINEAR_SMALL, name="linear") if which == "linear" else None)
    canary(judge)
    assert ev.verdict == Verdict.passed, summary(ev)
    assert ev.precision.below_fp32 and ev.precision.reasons, ev.precision



# Round six: strict float32 code must not be flagged: TF32 turned off, an attribute set to False, prose about TF32.
IEEE_KERNEL = LINEAR_KERNEL.replace("tl.dot(a, w)", "tl.dot(a, w, input_precision='ieee')")
NOT_BELOW = {
    "tf32_switched_off": IEEE_KERNEL.replace("class ModelNew", "torch.backends.cuda.matmul.allow_tf32 = False\n"
                                             "torch.backends.cudnn.allow_tf32 = False\n\n\nclass ModelNew"),
    "an_attribute_set_false": IEEE_KERNEL.replace("        M, K = x.shape", "        self.use_tf32 = False\n"
                                                  "        M, K = x.shape"),
    "prose_about_tf32": IEEE_KERNEL.replace("    pm = tl.program_id(0)", '    """Exact fp32 GEMM: input_precision='
                                            '"ieee", so no TF32 here."""\n    pm = tl.program_id(0)'),
}


@pytest.mark.parametrize("name", sorted(NOT_BELOW))
def test_strict_float32_code_is_not_flagged(judge: Judge, name: str) -> None:
    source = NOT_BELOW[name]
    assert source != IEEE_KERNEL and "input_precision='ieee'" in source
    ev = evaluate(judge, source, task=task(LINEAR_TASK, LINEAR_SMALL, name="linear"))
    assert ev.verdict == Verdict.passed and not ev.precision.below_fp32, (summary(ev), ev.precision)
