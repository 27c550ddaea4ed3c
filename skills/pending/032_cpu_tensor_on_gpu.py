"""Seed rule cpu-tensor-on-gpu: Always move every tensor argument to the GPU before launching (a CPU tensor cannot be accessed by a CUDA kernel)."""

FORMAT = 1
KEY = 'cpu-tensor-on-gpu'
TEXT = 'Always move every tensor argument to the GPU before launching (a CPU tensor cannot be accessed by a CUDA kernel).'
SIGNATURES = ['ValueError: Pointer argument (at <n>) cannot be accessed from Triton (cpu tensor?)']  # expected, unconfirmed: bench/collect_errors.py --mode native
ERROR_LINE = 'ValueError: Pointer argument (at 0) cannot be accessed from Triton (cpu tensor?)'
SEEN = []
GPU_ONLY = True
EXPECTED_GPU_ERROR = 'Pointer argument (at 0) cannot be accessed from Triton (cpu tensor?)'
GPU_CONFIRMED = []  # EXPECTED_GPU_ERROR not yet seen on a GPU

import torch
import triton
import triton.language as tl

@triton.jit
def add_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs) + 1.0)


def trigger(device):
    x = torch.randn(64, device="cpu")
    y = torch.empty(64, device=device)
    add_kernel[(1,)](x, y, BLOCK=64)
