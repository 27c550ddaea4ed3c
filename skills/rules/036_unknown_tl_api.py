"""Seed rule unknown-tl-api: You cannot call tl functions that do not exist (tl.relu, tl.tanh, tl.gelu...); write them from tl.maximum, tl.exp, tl.where or use tl.extra.cuda.libdevice."""

FORMAT = 1
KEY = 'unknown-tl-api'
TEXT = 'You cannot call tl functions that do not exist (tl.relu, tl.tanh, tl.gelu...); write them from tl.maximum, tl.exp, tl.where or use tl.extra.cuda.libdevice.'
SIGNATURES = ["CompilationError: module 'triton.language' has no attribute <name>"]
ERROR_LINE = "AttributeError: module 'triton.language' has no attribute 'relu'"
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend', 'triton-3.6-cuda']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def act_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.relu(tl.load(x_ptr + offs)))


@triton.jit
def act2_kernel(a, b, T: tl.constexpr):
    j = tl.arange(0, T)
    tl.store(b + j, tl.tanh(tl.load(a + j)))


def trigger(device):
    x = torch.randn(64, device=device)
    act_kernel[(1,)](x, BLOCK=64)


def trigger_variant(device):
    a = torch.randn(32, device=device)
    b = torch.empty_like(a)
    act2_kernel[(1,)](a, b, T=32)
