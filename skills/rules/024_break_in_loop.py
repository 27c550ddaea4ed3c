"""Seed rule break-in-loop: You cannot use break in a kernel loop; turn the exit condition into the loop bound or guard the body with an if."""

FORMAT = 1
KEY = 'break-in-loop'
TEXT = 'You cannot use break in a kernel loop; turn the exit condition into the loop bound or guard the body with an if.'
SIGNATURES = ['CompilationError: unsupported AST node type: Break']
ERROR_LINE = 'CompilationError: unsupported AST node type: Break'
SEEN = ['triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def brk_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for i in range(n):
        if i > 3:
            break
        acc += tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, acc)


def trigger(device):
    x = torch.randn(64, device=device)
    brk_kernel[(1,)](x, 8, BLOCK=64)
