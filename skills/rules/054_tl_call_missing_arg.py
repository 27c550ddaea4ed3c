"""Seed rule tl-call-missing-arg: Always pass every required argument to tl functions: tl.where(cond, x, y) needs both branches, tl.maximum(a, b) two operands."""

FORMAT = 1
KEY = 'tl-call-missing-arg'
TEXT = 'Always pass every required argument to tl functions: tl.where(cond, x, y) needs both branches, tl.maximum(a, b) two operands.'
SIGNATURES = ['CompilationError: <fn>() missing <n> required positional argument: <name>']
ERROR_LINE = "TypeError: where() missing 1 required positional argument: 'y'"
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend', 'triton-3.6-cuda']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def relu_kernel(x_ptr, B: tl.constexpr):
    offs = tl.arange(0, B)
    a = tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, tl.where(a > 0, a))


@triton.jit
def clamp_kernel(src, T: tl.constexpr):
    j = tl.arange(0, T)
    v = tl.load(src + j)
    tl.store(src + j, tl.maximum(v))


def trigger(device):
    x = torch.randn(64, device=device)
    relu_kernel[(1,)](x, B=64)


def trigger_variant(device):
    x = torch.randn(32, device=device)
    clamp_kernel[(1,)](x, T=32)
