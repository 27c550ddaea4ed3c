"""Seed rule numel-too-large: Always keep a block under Triton's maximum of 1048576 elements (2**20); tile bigger work across programs or loops."""

FORMAT = 1
KEY = 'numel-too-large'
TEXT = "Always keep a block under Triton's maximum of 1048576 elements (2**20); tile bigger work across programs or loops."
SIGNATURES = ['CompilationError: numel (<n>) exceeds triton maximum tensor numel (<n>)']
ERROR_LINE = 'ValueError: numel (2097152) exceeds triton maximum tensor numel (1048576)'
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def big_kernel(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs))


def trigger(device):
    x = torch.randn(2 ** 21, device=device)
    big_kernel[(1,)](x, BLOCK=2 ** 21)
