BLOCK_N = 1024  # tunable: 256, 512, 1024, 2048
NUM_WARPS = 8  # tunable: 2, 4, 8

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _layernorm_looped_kernel(x_ptr, w_ptr, b_ptr, out_ptr, n_cols, eps, BLOCK_N: tl.constexpr):
    # rows of any length: loop 1 accumulates the mean, loop 2 the centred variance, loop 3 writes
    row = tl.program_id(0)
    base = row.to(tl.int64) * n_cols
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for c0 in range(0, n_cols, BLOCK_N):
        cols = c0 + tl.arange(0, BLOCK_N)
        acc += tl.load(x_ptr + base + cols, mask=cols < n_cols, other=0.0)
    mean = tl.sum(acc, axis=0) / n_cols
    acc2 = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for c0 in range(0, n_cols, BLOCK_N):
        cols = c0 + tl.arange(0, BLOCK_N)
        mask = cols < n_cols
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0)
        d = tl.where(mask, x - mean, 0.0)
        acc2 += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc2, axis=0) / n_cols + eps)
    for c0 in range(0, n_cols, BLOCK_N):
        cols = c0 + tl.arange(0, BLOCK_N)
        mask = cols < n_cols
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0)
        tl.store(out_ptr + base + cols, (x - mean) * rstd * w + b, mask=mask)


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
        _layernorm_looped_kernel[(n_rows,)](x, self.ln.weight, self.ln.bias, out, n_cols, float(self.ln.eps),
                                            BLOCK_N=BLOCK_N, num_warps=NUM_WARPS)
        return out
