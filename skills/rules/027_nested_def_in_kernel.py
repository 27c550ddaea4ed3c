"""Seed rule nested-def-in-kernel: You cannot define a function inside a kernel; write it at module level with @triton.jit."""

FORMAT = 1
KEY = 'nested-def-in-kernel'
TEXT = 'You cannot define a function inside a kernel; write it at module level with @triton.jit.'
SIGNATURES = ['NameError: name <name> is not defined', 'CompilationError: nested function definitions are not allowed inside a @triton.jit kernel']
ERROR_LINE = "NameError: name 'x_ptr' is not defined"
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def nest_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)

    def twice(v):
        return v * 2.0

    tl.store(x_ptr + offs, twice(tl.load(x_ptr + offs)))


def trigger(device):
    x = torch.randn(64, device=device)
    nest_kernel[(1,)](x, BLOCK=64)
