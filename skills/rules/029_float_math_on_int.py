"""Seed rule float-math-on-int: Always convert integer blocks to float (x.to(tl.float32)) before tl.exp/tl.log/tl.sqrt and other float math."""

FORMAT = 1
KEY = 'float-math-on-int'
TEXT = 'Always convert integer blocks to float (x.to(tl.float32)) before tl.exp/tl.log/tl.sqrt and other float math.'
SIGNATURES = ['CompilationError: Expected dtype [<dtype>] but got <dtype>']
ERROR_LINE = "ValueError: Expected dtype ['fp32', 'fp64'] but got int32"
SEEN = ['triton-3.9-interpreter', 'triton-3.9-frontend']
GPU_ONLY = False
EXPECTED_GPU_ERROR = ''

import torch
import triton
import triton.language as tl

@triton.jit
def ex_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs)
    tl.store(y_ptr + offs, tl.exp(v))


@triton.jit
def rs_kernel(a, b, T: tl.constexpr):
    j = tl.arange(0, T)
    tl.store(b + j, tl.sqrt(j))


def trigger(device):
    x = torch.arange(64, device=device, dtype=torch.int32)
    y = torch.empty(64, device=device)
    ex_kernel[(1,)](x, y, BLOCK=64)


def trigger_variant(device):
    a = torch.randn(32, device=device)
    b = torch.empty_like(a)
    rs_kernel[(1,)](a, b, T=32)
