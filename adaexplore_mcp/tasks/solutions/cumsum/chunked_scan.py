BLOCK_N = 1024  # tunable: 256, 512, 1024, 2048
NUM_WARPS = 4  # tunable: 2, 4, 8

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _cumsum_chunked_kernel(x_ptr, out_ptr, n_cols, BLOCK_N: tl.constexpr):
    # one program per row: in-block scan (tl.cumsum) plus a running carry across chunks
    row = tl.program_id(0)
    base = row.to(tl.int64) * n_cols
    carry = tl.sum(tl.zeros((BLOCK_N,), dtype=tl.float32), axis=0)
    for c0 in range(0, n_cols, BLOCK_N):
        cols = c0 + tl.arange(0, BLOCK_N)
        mask = cols < n_cols
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0)
        s = tl.cumsum(x, axis=0) + carry
        tl.store(out_ptr + base + cols, s, mask=mask)
        carry += tl.sum(x, axis=0)


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
        _cumsum_chunked_kernel[(n_rows,)](xt, out, n_cols, BLOCK_N=BLOCK_N, num_warps=NUM_WARPS)
        return out.movedim(-1, d)
