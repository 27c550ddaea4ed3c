"""Seed rule lambda-in-kernel: You cannot define lambdas or nested functions inside a kernel; write a separate @triton.jit helper."""

FORMAT = 1
KEY = 'lambda-in-kernel'
TEXT = 'You cannot define lambdas or nested functions inside a kernel; write a separate @triton.jit helper.'
SIGNATURES = ['CompilationError: unsupported AST node type: Lambda']
ERROR_LINE = 'CompilationError: unsupported AST node type: Lambda'
SEEN = ['triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def lam_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    f = lambda v: v * 2.0
    tl.store(x_ptr + offs, f(tl.load(x_ptr + offs)))


def trigger(device):
    x = torch.randn(64, device=device)
    lam_kernel[(1,)](x, BLOCK=64)
