"""Seed rule undefined-name: Always define every name a kernel uses (tl.*, arguments, constexpr globals); misspelled tl APIs fail at compile time."""

FORMAT = 1
KEY = 'undefined-name'
TEXT = 'Always define every name a kernel uses (tl.*, arguments, constexpr globals); misspelled tl APIs fail at compile time.'
SIGNATURES = ['CompilationError: name <name> is not defined']
ERROR_LINE = "NameError: name 'scale' is not defined"
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def nm_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * scale)


def trigger(device):
    x = torch.randn(64, device=device)
    nm_kernel[(1,)](x, BLOCK=64)
