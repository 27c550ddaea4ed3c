"""Seed rule tensor-method-missing: You cannot call torch.Tensor methods (.sum(), .float(), .view(), .clamp()) on tl blocks unless tl defines them; use tl.sum, x.to(tl.float32), tl.reshape, tl.clamp."""

FORMAT = 1
KEY = 'tensor-method-missing'
TEXT = 'You cannot call torch.Tensor methods (.sum(), .float(), .view(), .clamp()) on tl blocks unless tl defines them; use tl.sum, x.to(tl.float32), tl.reshape, tl.clamp.'
SIGNATURES = ["CompilationError: 'tensor' object has no attribute <name>"]
ERROR_LINE = "AttributeError: 'tensor' object has no attribute 'float'"
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend', 'triton-3.6-cuda']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def m_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, x.float())


@triton.jit
def m2_kernel(a, T: tl.constexpr):
    j = tl.arange(0, T)
    v = tl.load(a + j)
    tl.store(a + j, v.clamp(0.0, 1.0))


def trigger(device):
    x = torch.randn(64, device=device)
    m_kernel[(1,)](x, BLOCK=64)


def trigger_variant(device):
    a = torch.randn(32, device=device)
    m2_kernel[(1,)](a, T=32)
