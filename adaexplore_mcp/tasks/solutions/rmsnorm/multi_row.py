ROWS_PER_PROGRAM = 1  # tunable: 1, 2, 4, 8
BLOCK_N = 1024  # tunable: 256, 512, 1024
NUM_WARPS = 4  # tunable: 4, 8

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_multirow_kernel(x_ptr, w_ptr, out_ptr, n_rows, n_cols, eps,
                             ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    # a (ROWS, BLOCK_N) tile per step: several rows per program, columns looped twice
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    rmask = rows < n_rows
    base = rows.to(tl.int64) * n_cols
    acc = tl.zeros((ROWS, BLOCK_N), dtype=tl.float32)
    for c0 in range(0, n_cols, BLOCK_N):
        cols = c0 + tl.arange(0, BLOCK_N)
        m = rmask[:, None] & (cols[None, :] < n_cols)
        x = tl.load(x_ptr + base[:, None] + cols[None, :], mask=m, other=0.0)
        acc += x * x
    r = 1.0 / tl.sqrt(tl.sum(acc, axis=1) / n_cols + eps)
    for c0 in range(0, n_cols, BLOCK_N):
        cols = c0 + tl.arange(0, BLOCK_N)
        cmask = cols < n_cols
        m = rmask[:, None] & cmask[None, :]
        x = tl.load(x_ptr + base[:, None] + cols[None, :], mask=m, other=0.0)
        w = tl.load(w_ptr + cols, mask=cmask, other=0.0)
        tl.store(out_ptr + base[:, None] + cols[None, :], x * r[:, None] * w[None, :], mask=m)


class ModelNew(nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(hidden) * 0.5 + 1.0)  # as the reference builds it (same seed)

    def forward(self, x):
        x = x.contiguous()
        n_cols = x.shape[-1]
        n_rows = x.numel() // n_cols
        out = torch.empty_like(x)
        grid = (triton.cdiv(n_rows, ROWS_PER_PROGRAM),)
        _rmsnorm_multirow_kernel[grid](x, self.weight, out, n_rows, n_cols, float(self.eps),
                                       ROWS=ROWS_PER_PROGRAM, BLOCK_N=BLOCK_N, num_warps=NUM_WARPS)
        return out
