"""Seed rule static-range-runtime: You cannot use tl.static_range with a runtime bound; use range() for runtime trip counts and tl.static_range only with tl.constexpr."""

FORMAT = 1
KEY = 'static-range-runtime'
TEXT = 'You cannot use tl.static_range with a runtime bound; use range() for runtime trip counts and tl.static_range only with tl.constexpr.'
SIGNATURES = ['CompilationError: <dtype>[] used as tl.static_range <bound> value is not a constexpr']
ERROR_LINE = 'AssertionError: int32[] used as tl.static_range start value is not a constexpr'
SEEN = ['triton-3.9-frontend', 'triton-3.6-cuda']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def loop_kernel(x_ptr, n_iters, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for i in tl.static_range(n_iters):
        acc += tl.load(x_ptr + i * BLOCK + offs)
    tl.store(x_ptr + offs, acc)


def trigger(device):
    x = torch.randn(4 * 32, device=device)
    loop_kernel[(1,)](x, 4, BLOCK=32)
