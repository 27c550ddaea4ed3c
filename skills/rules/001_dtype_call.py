"""Seed rule dtype-call: You cannot call a dtype such as tl.float32(x) as a function inside a kernel; convert with x.to(tl.float32)."""

FORMAT = 1
KEY = 'dtype-call'
TEXT = 'You cannot call a dtype such as tl.float32(x) as a function inside a kernel; convert with x.to(tl.float32).'
SIGNATURES = ["CompilationError: 'dtype' object is not callable"]
ERROR_LINE = "TypeError: 'dtype' object is not callable"
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend', 'triton-3.6-cuda']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def cast_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    y = tl.float32(x)
    tl.store(x_ptr + offs, y, mask=offs < n)


@triton.jit
def half_acc_kernel(src, dst, numel, TILE: tl.constexpr):
    pid = tl.program_id(0)
    idx = pid * TILE + tl.arange(0, TILE)
    acc = tl.load(src + idx, mask=idx < numel, other=0.0) * 2.0
    tl.store(dst + idx, tl.float16(acc), mask=idx < numel)


def trigger(device):
    x = torch.randn(100, device=device)
    cast_kernel[(1,)](x, 100, BLOCK=128)


def trigger_variant(device):
    a = torch.randn(300, device=device)
    b = torch.empty(300, device=device, dtype=torch.float16)
    half_acc_kernel[(5,)](a, b, 300, TILE=64)
