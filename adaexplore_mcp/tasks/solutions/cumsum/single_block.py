NUM_WARPS = 8  # tunable: 4, 8, 16

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _cumsum_row_kernel(x_ptr, out_ptr, n_cols, BLOCK_N: tl.constexpr):
    # whole row scanned in one tl.cumsum (BLOCK_N >= n_cols)
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    base = row.to(tl.int64) * n_cols
    x = tl.load(x_ptr + base + cols, mask=mask, other=0.0)
    tl.store(out_ptr + base + cols, tl.cumsum(x, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        d = self.dim % x.dim()
        xt = x.movedim(d, -1).contiguous()
        n_cols = xt.shape[-1]
        n_rows = xt.numel() // n_cols
        out = torch.empty_like(xt)
        BLOCK_N = triton.next_power_of_2(n_cols)
        _cumsum_row_kernel[(n_rows,)](xt, out, n_cols, BLOCK_N=BLOCK_N, num_warps=NUM_WARPS)
        return out.movedim(-1, d)
