"""Seed rule global-access: You cannot use a module-level name inside a kernel unless it is a @triton.jit function or a NAME = tl.constexpr(value) global; pass other values as arguments."""

FORMAT = 1
KEY = 'global-access'
TEXT = 'You cannot use a module-level name inside a kernel unless it is a @triton.jit function or a NAME = tl.constexpr(value) global; pass other values as arguments.'
SIGNATURES = ["CompilationError: Cannot access global variable <name> from within @jit'ed function"]
ERROR_LINE = "NameError: Cannot access global variable SCALE from within @jit'ed function. Triton kernels can only access global variables that are instanstiated as constexpr (`x = triton.language.constexpr(42)`). Note that this is different from annotating a variable as constexpr (`x: triton.language.constexpr = 42`), which is not supported.  Alternatively, set the envvar TRITON_ALLOW_NON_CONSTEXPR_GLOBALS=1, but we do not promise to support this forever."
SEEN = ['triton-3.9-frontend', 'triton-3.6-cuda']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

SCALE = 2.5
EPS = 1e-5


def gelu(x):
    return 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))


@triton.jit
def sc_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * SCALE)


@triton.jit
def norm_kernel(a, b, T: tl.constexpr):
    j = tl.arange(0, T)
    v = tl.load(a + j)
    tl.store(b + j, v / tl.sqrt(tl.sum(v * v) + EPS))


@triton.jit
def gelu_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, gelu(tl.load(x_ptr + offs)))


def trigger(device):
    x = torch.randn(64, device=device)
    sc_kernel[(1,)](x, BLOCK=64)


def trigger_variant(device):
    a = torch.randn(32, device=device)
    b = torch.empty_like(a)
    norm_kernel[(1,)](a, b, T=32)


def trigger_helper(device):
    x = torch.randn(64, device=device)
    gelu_kernel[(1,)](x, BLOCK=64)
