"""Seed rule non-bool-mask: Always give tl.load/tl.store a boolean mask (offs < n, or & of comparisons), never a float or int block."""

FORMAT = 1
KEY = 'non-bool-mask'
TEXT = 'Always give tl.load/tl.store a boolean mask (offs < n, or & of comparisons), never a float or int block.'
SIGNATURES = ['CompilationError: mask has unsupported dtype']
ERROR_LINE = 'ValueError: mask has unsupported dtype'
SEEN = ['triton-3.9-interpreter']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def mk_kernel(x_ptr, B: tl.constexpr):
    offs = tl.arange(0, B)
    m = offs.to(tl.float32)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m, other=0.0))


def trigger(device):
    x = torch.randn(64, device=device)
    mk_kernel[(1,)](x, B=64)
