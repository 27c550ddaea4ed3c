"""Seed rule range-over-tensor: You cannot use a loaded block tensor as a range() bound; loop bounds must be scalars (kernel arguments or scalar loads)."""

FORMAT = 1
KEY = 'range-over-tensor'
TEXT = 'You cannot use a loaded block tensor as a range() bound; loop bounds must be scalars (kernel arguments or scalar loads).'
SIGNATURES = ['CompilationError: only <n>-dimensional arrays can be converted to Python scalars', 'CompilationError: For upper bound must be a scalar, got <block>']
ERROR_LINE = 'TypeError: only 0-dimensional arrays can be converted to Python scalars'
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def loop_kernel(x_ptr, n_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    counts = tl.load(n_ptr + offs)
    acc = tl.zeros((BLOCK,), tl.float32)
    for i in range(counts):
        acc += 1.0
    tl.store(x_ptr + offs, acc)


def trigger(device):
    x = torch.randn(16, device=device)
    n = torch.full((16,), 3, device=device, dtype=torch.int32)
    loop_kernel[(1,)](x, n, BLOCK=16)
