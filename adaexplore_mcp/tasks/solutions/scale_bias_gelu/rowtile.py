BLOCK_N = 1024  # tunable: 256, 512, 1024, 2048, 4096
NUM_WARPS = 4  # tunable: 2, 4, 8

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scale_bias_gelu_kernel(x_ptr, scale_ptr, bias_ptr, out_ptr, n_cols, BLOCK_N: tl.constexpr):
    # one program per (row, column tile): no integer modulo, scale/bias loads are contiguous
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    offs = row.to(tl.int64) * n_cols + cols
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    s = tl.load(scale_ptr + cols, mask=mask, other=0.0)
    b = tl.load(bias_ptr + cols, mask=mask, other=0.0)
    y = x * s + b
    y = 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476))
    tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(dim) * 0.5 + 1.0)  # as the reference builds them (same seed)
        self.bias = nn.Parameter(torch.randn(dim) * 0.5)

    def forward(self, x):
        x = x.contiguous()
        n_cols = x.shape[-1]
        n_rows = x.numel() // n_cols
        out = torch.empty_like(x)
        grid = (n_rows, triton.cdiv(n_cols, BLOCK_N))
        _scale_bias_gelu_kernel[grid](x, self.scale, self.bias, out, n_cols, BLOCK_N=BLOCK_N, num_warps=NUM_WARPS)
        return out
