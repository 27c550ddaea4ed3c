"""Seed rule torch-dtype-in-kernel: Always use tl dtypes (tl.float32) inside kernels; torch dtypes (torch.float32) are not accepted by tl.zeros, .to() or other tl APIs."""

FORMAT = 1
KEY = 'torch-dtype-in-kernel'
TEXT = 'Always use tl dtypes (tl.float32) inside kernels; torch dtypes (torch.float32) are not accepted by tl.zeros, .to() or other tl APIs.'
SIGNATURES = ["CompilationError: 'torch.dtype' object has no attribute <name>"]
ERROR_LINE = "AttributeError: 'torch.dtype' object has no attribute 'is_int'"
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def z_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=torch.float32)
    tl.store(x_ptr + offs, acc)


def trigger(device):
    x = torch.randn(64, device=device)
    z_kernel[(1,)](x, BLOCK=64)
