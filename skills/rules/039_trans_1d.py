"""Seed rule trans-1d: Always give tl.trans/tl.permute a block with the dimensions you permute (tl.trans needs a 2D block)."""

FORMAT = 1
KEY = 'trans-1d'
TEXT = 'Always give tl.trans/tl.permute a block with the dimensions you permute (tl.trans needs a 2D block).'
SIGNATURES = ['CompilationError: tl.trans invoked with a <n>- or <n>-dimensional tensor']
ERROR_LINE = 'ValueError: tl.trans invoked with a 0- or 1-dimensional tensor'
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def t_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, tl.trans(v))


def trigger(device):
    x = torch.randn(64, device=device)
    t_kernel[(1,)](x, BLOCK=64)
