"""Seed rule dot-shape-mismatch: Always make tl.dot's inner dimensions agree: a is [M, K] and b is [K, N]."""

FORMAT = 1
KEY = 'dot-shape-mismatch'
TEXT = "Always make tl.dot's inner dimensions agree: a is [M, K] and b is [K, N]."
SIGNATURES = ['CompilationError: input and other must have equal reduction dimensions']
ERROR_LINE = 'AssertionError: input and other must have equal reduction dimensions'
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def mm_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, K: tl.constexpr, N: tl.constexpr):
    rm = tl.arange(0, M)
    rk = tl.arange(0, K)
    rn = tl.arange(0, N)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rn[:, None] * K + rk[None, :])
    c = tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c)


def trigger(device):
    a = torch.randn(32, 64, device=device)
    b = torch.randn(32, 64, device=device)
    c = torch.empty(32, 32, device=device)
    mm_kernel[(1,)](a, b, c, M=32, K=64, N=32)
