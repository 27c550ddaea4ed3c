NUM_WARPS = 8  # tunable: 4, 8, 16

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_row_kernel(x_ptr, w_ptr, out_ptr, n_cols, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    base = row.to(tl.int64) * n_cols
    x = tl.load(x_ptr + base + cols, mask=mask, other=0.0)
    ms = tl.sum(x * x, axis=0) / n_cols
    r = 1.0 / tl.sqrt(ms + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    tl.store(out_ptr + base + cols, x * r * w, mask=mask)


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
        BLOCK_N = triton.next_power_of_2(n_cols)
        _rmsnorm_row_kernel[(n_rows,)](x, self.weight, out, n_cols, float(self.eps), BLOCK_N=BLOCK_N,
                                       num_warps=NUM_WARPS)
        return out
