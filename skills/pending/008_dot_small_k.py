"""Seed rule dot-small-k: Always give tl.dot blocks with M, N and K of at least 16 (pad small dimensions and mask)."""

FORMAT = 1
KEY = 'dot-small-k'
TEXT = 'Always give tl.dot blocks with M, N and K of at least 16 (pad small dimensions and mask).'
SIGNATURES = ['CompilationError: Input shapes should have M >= <n>, N >= <n> and K >= <n>']  # expected, unconfirmed: bench/collect_errors.py --mode native
ERROR_LINE = 'AssertionError: Input shapes should have M >= 16, N >= 16 and K >= 16'
SEEN = []
GPU_ONLY = True
EXPECTED_GPU_ERROR = 'Input shapes should have M >= 16, N >= 16 and K >= 16'
GPU_CONFIRMED = []  # EXPECTED_GPU_ERROR not yet seen on a GPU

import torch
import triton
import triton.language as tl

@triton.jit
def mm_kernel(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    c = tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], c)


def trigger(device):
    a = torch.randn(32, 8, device=device)
    b = torch.randn(8, 32, device=device)
    c = torch.empty(32, 32, device=device)
    mm_kernel[(1,)](a, b, c, BM=32, BN=32, BK=8)


def trigger_variant(device):
    a = torch.randn(8, 32, device=device)
    b = torch.randn(32, 64, device=device)
    c = torch.empty(8, 64, device=device)
    mm_kernel[(1,)](a, b, c, BM=8, BN=64, BK=32)
