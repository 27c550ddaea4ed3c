"""Tiny tasks and candidates shared by the MCP-level tests (CPU interpreter sized)."""

SCALE_TASK = '''
import torch
import torch.nn as nn

n_rows = 4
n_cols = 32


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return x * self.scale + 1.0


def get_inputs():
    return [torch.randn(n_rows, n_cols)]


def get_init_inputs():
    return [2.0]
'''

SCALE_KERNEL = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * scale + 1.0, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        scale_kernel[(triton.cdiv(n, 128),)](x, out, n, self.scale, BLOCK=128)
        return out
'''

PURE_TORCH_KERNEL = '''
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return x * self.scale + 1.0
'''

FLOOD_KERNEL = SCALE_KERNEL.replace(
    "class ModelNew(nn.Module):",
    'import os, sys\nprint("{" * 200_000)\nos.write(1, b"not json\\n" * 20_000)\n\n\nclass ModelNew(nn.Module):',
).replace("        return out", '        print("x" * 100_000, flush=True)\n        return out')
