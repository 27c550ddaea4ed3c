"""Seed rule tensor-item-assign: You cannot assign into a block element (x[i] = v) inside a kernel; build the block with tl.where or store through pointers."""

FORMAT = 1
KEY = 'tensor-item-assign'
TEXT = 'You cannot assign into a block element (x[i] = v) inside a kernel; build the block with tl.where or store through pointers.'
SIGNATURES = ["CompilationError: 'tensor' object does not support item assignment", 'CompilationError: __setitem__ is not supported in triton']
ERROR_LINE = "TypeError: 'tensor' object does not support item assignment"
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def set_kernel(x_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    x[0] = 0.0
    tl.store(x_ptr + tl.arange(0, BLOCK), x)


def trigger(device):
    x = torch.randn(64, device=device)
    set_kernel[(1,)](x, BLOCK=64)
