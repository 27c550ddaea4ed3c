"""Seed rule grid-int: Always give the launch grid as a tuple, e.g. kernel[(n,)] or a lambda returning a tuple, never a bare int."""

FORMAT = 1
KEY = 'grid-int'
TEXT = 'Always give the launch grid as a tuple, e.g. kernel[(n,)] or a lambda returning a tuple, never a bare int.'
SIGNATURES = ["TypeError: object of type 'int' has no <fn>()"]
ERROR_LINE = "TypeError: object of type 'int' has no len()"
SEEN = ['triton-3.9-interpreter']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def add_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1.0)


def trigger(device):
    x = torch.randn(256, device=device)
    add_kernel[4](x, BLOCK=64)
