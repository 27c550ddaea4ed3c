"""Seed rule dot-input-precision: Always pass tl.dot an input_precision the target supports ('tf32', 'tf32x3' or 'ieee'; 'ieee' for exact float32)."""

FORMAT = 1
KEY = 'dot-input-precision'
TEXT = "Always pass tl.dot an input_precision the target supports ('tf32', 'tf32x3' or 'ieee'; 'ieee' for exact float32)."
SIGNATURES = ['CompilationError: input_precision must be one of <options>. Got <dtype>']
ERROR_LINE = "AssertionError: input_precision must be one of ('tf32', 'tf32x3', 'ieee'). Got fp64"
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def mm_kernel(a_ptr, c_ptr, B: tl.constexpr):
    r = tl.arange(0, B)
    a = tl.load(a_ptr + r[:, None] * B + r[None, :])
    tl.store(c_ptr + r[:, None] * B + r[None, :], tl.dot(a, a, input_precision="fp64"))


def trigger(device):
    a = torch.randn(32, 32, device=device)
    c = torch.empty(32, 32, device=device)
    mm_kernel[(1,)](a, c, B=32)
