"""Seed rule dot-dtype-mismatch: Always cast both tl.dot operands to the same dtype (e.g. both .to(tl.float16) or both float32)."""

FORMAT = 1
KEY = 'dot-dtype-mismatch'
TEXT = 'Always cast both tl.dot operands to the same dtype (e.g. both .to(tl.float16) or both float32).'
SIGNATURES = ['CompilationError: Both operands must be same dtype. Got <dtype> and <dtype>']
ERROR_LINE = 'AssertionError: Both operands must be same dtype. Got fp32 and fp16'
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def mm_kernel(a_ptr, b_ptr, c_ptr, B: tl.constexpr):
    r = tl.arange(0, B)
    a = tl.load(a_ptr + r[:, None] * B + r[None, :])
    b = tl.load(b_ptr + r[:, None] * B + r[None, :])
    c = tl.dot(a, b.to(tl.float16))
    tl.store(c_ptr + r[:, None] * B + r[None, :], c)


def trigger(device):
    a = torch.randn(32, 32, device=device)
    b = torch.randn(32, 32, device=device)
    c = torch.empty(32, 32, device=device)
    mm_kernel[(1,)](a, b, c, B=32)
