"""Seed rule tensor-index-scalar: You cannot index a block with an integer or tensor (x[i]); use tl.where masks, tl.sum over a masked block, or load the element through its pointer."""

FORMAT = 1
KEY = 'tensor-index-scalar'
TEXT = 'You cannot index a block with an integer or tensor (x[i]); use tl.where masks, tl.sum over a masked block, or load the element through its pointer.'
SIGNATURES = ["CompilationError: 'int' object is not iterable", 'CompilationError: unsupported tensor index: constexpr[<n>]']
ERROR_LINE = "TypeError: 'int' object is not iterable"
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def get_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    tl.store(y_ptr, x[3])


def trigger(device):
    x = torch.randn(64, device=device)
    y = torch.empty(1, device=device)
    get_kernel[(1,)](x, y, BLOCK=64)
