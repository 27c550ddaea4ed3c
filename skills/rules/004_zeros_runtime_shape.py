"""Seed rule zeros-runtime-shape: You cannot build tl.zeros/tl.full with a runtime shape; every block shape must be made of tl.constexpr values."""

FORMAT = 1
KEY = 'zeros-runtime-shape'
TEXT = 'You cannot build tl.zeros/tl.full with a runtime shape; every block shape must be made of tl.constexpr values.'
SIGNATURES = ['CompilationError: Shape element <n> must have type `constexpr[int]`, got `constexpr[<class tensor>]']
ERROR_LINE = "TypeError: Shape element 0 must have type `constexpr[int]`, got `constexpr[<class 'triton.language.core.tensor'>]"
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def acc_kernel(x_ptr, n, BLOCK):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    offs = tl.arange(0, 16)
    tl.store(x_ptr + offs, acc[:16] if False else tl.load(x_ptr + offs))


@triton.jit
def fill_kernel(out_ptr, width):
    vals = tl.full((width,), 1.0, tl.float32)
    tl.store(out_ptr + tl.arange(0, 32), tl.sum(vals) + tl.zeros((32,), tl.float32))


def trigger(device):
    x = torch.randn(16, device=device)
    acc_kernel[(1,)](x, 16, 32)


def trigger_variant(device):
    x = torch.randn(32, device=device)
    fill_kernel[(1,)](x, 32)
