NUM_WARPS = 16  # tunable: 4, 8, 16

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _layernorm_row_kernel(x_ptr, w_ptr, b_ptr, out_ptr, n_cols, eps, BLOCK_N: tl.constexpr):
    # one program per row, whole row in registers: exact two-pass mean / variance
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    base = row.to(tl.int64) * n_cols
    x = tl.load(x_ptr + base + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    tl.store(out_ptr + base + cols, d * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.ln = nn.LayerNorm(hidden, eps=1e-5)
        with torch.no_grad():  # as the reference builds it (same seed)
            self.ln.weight.copy_(torch.randn(hidden) * 0.5 + 1.0)
            self.ln.bias.copy_(torch.randn(hidden) * 0.5)

    def forward(self, x):
        x = x.contiguous()
        n_cols = x.shape[-1]
        n_rows = x.numel() // n_cols
        out = torch.empty_like(x)
        BLOCK_N = triton.next_power_of_2(n_cols)
        _layernorm_row_kernel[(n_rows,)](x, self.ln.weight, self.ln.bias, out, n_cols, float(self.ln.eps),
                                         BLOCK_N=BLOCK_N, num_warps=NUM_WARPS)
        return out
