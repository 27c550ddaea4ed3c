BLOCK_R = 32  # tunable: 8, 16, 32, 64
BLOCK_C = 32  # tunable: 32, 64, 128, 256
NUM_WARPS = 4  # tunable: 2, 4, 8

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _sum_dim1_kernel(x_ptr, out_ptr, R, C, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # x viewed as (B, R, C), contiguous; each program owns one batch and a strip of columns and
    # walks down the reduced dimension with coalesced (BLOCK_R, BLOCK_C) tiles.
    b = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cols < C
    base = x_ptr + b.to(tl.int64) * R * C
    acc = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        m = (rows[:, None] < R) & cmask[None, :]
        acc += tl.load(base + rows[:, None] * C + cols[None, :], mask=m, other=0.0)
    total = tl.sum(acc, axis=0)
    tl.store(out_ptr + b.to(tl.int64) * C + cols, total, mask=cmask)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        d = self.dim % x.dim()
        shape = list(x.shape)
        B = 1
        for s in shape[:d]:
            B *= s
        R = shape[d]
        C = 1
        for s in shape[d + 1:]:
            C *= s
        x = x.contiguous()
        out_shape = shape[:d] + [1] + shape[d + 1:]
        out = torch.empty(out_shape, device=x.device, dtype=x.dtype)
        grid = (B, triton.cdiv(C, BLOCK_C))
        _sum_dim1_kernel[grid](x, out, R, C, BLOCK_R=BLOCK_R, BLOCK_C=BLOCK_C, num_warps=NUM_WARPS)
        return out
