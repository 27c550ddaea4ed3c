"""Seed rule unsupported-arg-type: You cannot pass a Python list, tuple of floats or string to a non-constexpr kernel parameter; pass tensors, ints, floats or make it tl.constexpr."""

FORMAT = 1
KEY = 'unsupported-arg-type'
TEXT = 'You cannot pass a Python list, tuple of floats or string to a non-constexpr kernel parameter; pass tensors, ints, floats or make it tl.constexpr.'
SIGNATURES = ['TypeError: failed to specialize argument of type: <type>']
ERROR_LINE = 'TypeError: failed to specialize argument of type: list'
SEEN = ['triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def scale_kernel(x_ptr, scales, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 2.0)


@triton.jit
def act_kernel(x_ptr, mode, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs))


def trigger(device):
    x = torch.randn(64, device=device)
    scale_kernel[(1,)](x, [1.0, 2.0, 3.0], BLOCK=64)


def trigger_variant(device):
    x = torch.randn(64, device=device)
    act_kernel[(1,)](x, "relu", BLOCK=64)
