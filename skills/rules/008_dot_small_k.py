"""Seed rule dot-small-k: Always make the inner (K) block of tl.dot at least 16 (pad K with masked loads); triton 3.6 on a GPU refuses a smaller one."""

FORMAT = 1
KEY = 'dot-small-k'
TEXT = 'Always make the inner (K) block of tl.dot at least 16 (pad K with masked loads); a GPU compile refuses a smaller one.'
SIGNATURES = ['CompilationError: Input shapes should have M >= <n>, N >= <n> and K >= <n>']  # seen on triton-3.6-cuda (H100, 2026-12-07): 7 failures of the search campaign, bench/results/2026-12-07-campaign
ERROR_LINE = 'AssertionError: Input shapes should have M >= 1, N >= 1 and K >= 16'
SEEN = ['triton-3.6-cuda']
GPU_ONLY = True
EXPECTED_GPU_ERROR = 'Input shapes should have M >= 1, N >= 1 and K >= 16'
GPU_CONFIRMED = ['triton-3.6-cuda']  # EXPECTED_GPU_ERROR seen verbatim on an H100, triton 3.6.0, torch 2.11, 2026-12-07, in 7 kernels written by the search campaign's proposers (K blocks of 8), not this file's trigger: tests/fixtures/errors/errors.json id dot-small-k.campaign.gpu-3.6

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
    a = torch.randn(64, 8, device=device)
    b = torch.randn(8, 16, device=device)
    c = torch.empty(64, 16, device=device)
    mm_kernel[(1,)](a, b, c, BM=64, BN=16, BK=8)
