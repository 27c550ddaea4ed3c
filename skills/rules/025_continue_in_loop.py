"""Seed rule continue-in-loop: You cannot use continue in a kernel loop; wrap the rest of the body in an if instead."""

FORMAT = 1
KEY = 'continue-in-loop'
TEXT = 'You cannot use continue in a kernel loop; wrap the rest of the body in an if instead.'
SIGNATURES = ['CompilationError: unsupported AST node type: Continue']
ERROR_LINE = 'CompilationError: unsupported AST node type: Continue'
SEEN = ['triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def cont_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for i in range(n):
        if i % 2 == 0:
            continue
        acc += tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, acc)


def trigger(device):
    x = torch.randn(64, device=device)
    cont_kernel[(1,)](x, 8, BLOCK=64)
