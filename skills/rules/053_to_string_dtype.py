"""Seed rule to-string-dtype: Always convert with a tl dtype, x.to(tl.float16); strings such as x.to('float16') are not dtypes."""

FORMAT = 1
KEY = 'to-string-dtype'
TEXT = "Always convert with a tl dtype, x.to(tl.float16); strings such as x.to('float16') are not dtypes."
SIGNATURES = ["CompilationError: 'str' object has no attribute <name>"]
ERROR_LINE = "AttributeError: 'str' object has no attribute 'scalar'"
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def half_kernel(x_ptr, B: tl.constexpr):
    offs = tl.arange(0, B)
    a = tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, a.to("float16"))


def trigger(device):
    x = torch.randn(64, device=device)
    half_kernel[(1,)](x, B=64)
