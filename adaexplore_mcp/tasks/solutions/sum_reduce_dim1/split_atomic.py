BLOCK_R = 16  # tunable: 16, 32, 64
BLOCK_C = 64  # tunable: 64, 128, 256
SPLIT_R = 2  # tunable: 2, 4, 8, 16
NUM_WARPS = 4  # tunable: 4, 8

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _sum_dim1_split_kernel(x_ptr, out_ptr, R, C, rows_per_split,
                           BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # the reduced dimension is split over a third grid axis; partial sums meet in atomic adds
    b = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    split = tl.program_id(2)
    cmask = cols < C
    r_start = split * rows_per_split
    r_end = tl.minimum(r_start + rows_per_split, R)
    base = x_ptr + b.to(tl.int64) * R * C
    acc = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
    for r0 in range(r_start, r_end, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        m = (rows[:, None] < r_end) & cmask[None, :]
        acc += tl.load(base + rows[:, None] * C + cols[None, :], mask=m, other=0.0)
    total = tl.sum(acc, axis=0)
    tl.atomic_add(out_ptr + b.to(tl.int64) * C + cols, total, mask=cmask)


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
        out = torch.zeros(shape[:d] + [1] + shape[d + 1:], device=x.device, dtype=torch.float32)
        splits = max(1, min(SPLIT_R, triton.cdiv(R, BLOCK_R)))
        rows_per_split = triton.cdiv(triton.cdiv(R, splits), BLOCK_R) * BLOCK_R
        splits = triton.cdiv(R, rows_per_split)
        grid = (B, triton.cdiv(C, BLOCK_C), splits)
        _sum_dim1_split_kernel[grid](x, out, R, C, rows_per_split, BLOCK_R=BLOCK_R, BLOCK_C=BLOCK_C,
                                     num_warps=NUM_WARPS)
        return out.to(x.dtype)
