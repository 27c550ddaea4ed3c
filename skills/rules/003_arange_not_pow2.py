"""Seed rule arange-not-pow2: Always make the length of tl.arange a power of 2 (pad to the next power of 2 and mask the tail)."""

FORMAT = 1
KEY = 'arange-not-pow2'
TEXT = 'Always make the length of tl.arange a power of 2 (pad to the next power of 2 and mask the tail).'
SIGNATURES = ["CompilationError: arange's range must be a power of <n>"]
ERROR_LINE = "ValueError: arange's range must be a power of 2"
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend', 'triton-3.6-cuda']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def row_kernel(x_ptr, y_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs) + 1.0)


@triton.jit
def tile_kernel(a_ptr, b_ptr, M, BLOCK_M: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    v = tl.load(a_ptr + rows, mask=rows < M)
    tl.store(b_ptr + rows, v, mask=rows < M)


def trigger(device):
    x = torch.randn(100, device=device)
    y = torch.empty_like(x)
    row_kernel[(1,)](x, y, N=100)


def trigger_variant(device):
    x = torch.randn(777, device=device)
    y = torch.empty_like(x)
    tile_kernel[(10,)](x, y, 777, BLOCK_M=96)
