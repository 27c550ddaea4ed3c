"""Seed rule try-in-kernel: You cannot use try/except, with or raise inside a kernel."""

FORMAT = 1
KEY = 'try-in-kernel'
TEXT = 'You cannot use try/except, with or raise inside a kernel.'
SIGNATURES = ['CompilationError: unsupported AST node type: Try']
ERROR_LINE = 'CompilationError: unsupported AST node type: Try'
SEEN = ['triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def try_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    try:
        v = tl.load(x_ptr + offs)
    except Exception:
        v = tl.zeros((BLOCK,), tl.float32)
    tl.store(x_ptr + offs, v)


def trigger(device):
    x = torch.randn(64, device=device)
    try_kernel[(1,)](x, BLOCK=64)
