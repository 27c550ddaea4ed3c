"""Seed rule numpy-in-kernel: You cannot call numpy inside a @triton.jit kernel; use tl.* operations."""

FORMAT = 1
KEY = 'numpy-in-kernel'
TEXT = 'You cannot call numpy inside a @triton.jit kernel; use tl.* operations.'
SIGNATURES = ['CompilationError: loop of ufunc does not support argument <n> of type tensor which has no callable tanh method']
ERROR_LINE = 'TypeError: loop of ufunc does not support argument 0 of type tensor which has no callable tanh method'
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

import numpy as np


@triton.jit
def np_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, np.tanh(x))


def trigger(device):
    x = torch.randn(64, device=device)
    np_kernel[(1,)](x, BLOCK=64)
