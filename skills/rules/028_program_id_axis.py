"""Seed rule program-id-axis: Always use tl.program_id / tl.num_programs with axis 0, 1 or 2."""

FORMAT = 1
KEY = 'program-id-axis'
TEXT = 'Always use tl.program_id / tl.num_programs with axis 0, 1 or 2.'
SIGNATURES = ['CompilationError: program_id axis must be <n>, or <n> but got <n>']
ERROR_LINE = 'ValueError: program_id axis must be 0, 1, or 2 but got 3'
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def pid_kernel(x_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(3)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs))


def trigger(device):
    x = torch.randn(64, device=device)
    pid_kernel[(1,)](x, BLOCK=64)
