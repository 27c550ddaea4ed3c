"""Seed rule atomic-non-pointer: Always give tl.atomic_add/tl.atomic_max a pointer block as first argument, not a loaded value."""

FORMAT = 1
KEY = 'atomic-non-pointer'
TEXT = 'Always give tl.atomic_add/tl.atomic_max a pointer block as first argument, not a loaded value.'
SIGNATURES = ['CompilationError: Unsupported ptr type <block> in `tl.atomic_add`']
ERROR_LINE = "ValueError: Unsupported ptr type <['64'], fp32> in `tl.atomic_add`"
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def at_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs)
    tl.atomic_add(v, 1.0)


def trigger(device):
    x = torch.randn(64, device=device)
    y = torch.empty(64, device=device)
    at_kernel[(1,)](x, y, BLOCK=64)
