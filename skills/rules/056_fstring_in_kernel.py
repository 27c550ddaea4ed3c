"""Seed rule fstring-in-kernel: You cannot format block values in f-strings inside a kernel; use tl.device_print('a', a)."""

FORMAT = 1
KEY = 'fstring-in-kernel'
TEXT = "You cannot format block values in f-strings inside a kernel; use tl.device_print('a', a)."
SIGNATURES = ['CompilationError: Cannot evaluate f-string containing non-constexpr conversion values, found conversion of type <class tensor>']
ERROR_LINE = "CompilationError: Cannot evaluate f-string containing non-constexpr conversion values, found conversion of type <class 'triton.language.core.tensor'>"
SEEN = ['triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def dbg_kernel(x_ptr, B: tl.constexpr):
    offs = tl.arange(0, B)
    a = tl.load(x_ptr + offs)
    tl.device_print(f"a={a}")
    tl.store(x_ptr + offs, a)


def trigger(device):
    x = torch.randn(64, device=device)
    dbg_kernel[(1,)](x, B=64)
