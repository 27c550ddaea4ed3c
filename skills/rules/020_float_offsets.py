"""Seed rule float-offsets: Always compute pointer offsets in integers; a float offset cannot be added to a pointer."""

FORMAT = 1
KEY = 'float-offsets'
TEXT = 'Always compute pointer offsets in integers; a float offset cannot be added to a pointer.'
SIGNATURES = ['CompilationError: invalid operands of type pointer<<dtype>> and <dtype>']
ERROR_LINE = 'IncompatibleTypeErrorImpl: invalid operands of type pointer<fp32> and triton.language.float32'
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def off_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK).to(tl.float32) * 1.0
    tl.store(x_ptr + offs, tl.load(x_ptr + tl.arange(0, BLOCK)))


def trigger(device):
    x = torch.randn(64, device=device)
    off_kernel[(1,)](x, BLOCK=64)
