"""Seed rule shared-memory-out-of-resources: Always size tiles (BLOCK_M x BLOCK_K + BLOCK_K x BLOCK_N per stage) to fit shared memory; lower block sizes or num_stages when a launch runs out of resources."""

FORMAT = 1
KEY = 'shared-memory-out-of-resources'
TEXT = 'Always size tl.dot tiles so all pipeline stages fit in shared memory (about 227 KB on H100/H200); lower BLOCK sizes or num_stages when a launch runs out of resources.'
SIGNATURES = ['OutOfResources: out of resource: shared memory, Required: <n>, Hardware limit: <n>']  # expected, unconfirmed: bench/collect_errors.py --mode native
ERROR_LINE = 'OutOfResources: out of resource: shared memory, Required: 262144, Hardware limit: 232448. Reducing block sizes or `num_stages` may help.'
SEEN = []
GPU_ONLY = True
EXPECTED_GPU_ERROR = 'out of resource: shared memory, Required: 262144, Hardware limit: 232448. Reducing block sizes or `num_stages` may help.'
GPU_CONFIRMED = []  # EXPECTED_GPU_ERROR not yet seen on a GPU

import torch
import triton
import triton.language as tl


@triton.jit
def big_tile_kernel(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, 4):
        a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
        b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


def trigger(device):
    if not str(device).startswith("cuda"):
        return  # shared memory exists only on the GPU; the interpreter runs this fine
    a = torch.randn(256, 256, device=device)
    b = torch.randn(256, 256, device=device)
    c = torch.empty(256, 256, device=device)
    big_tile_kernel[(1,)](a, b, c, BM=256, BN=256, BK=256, num_stages=3)
