BLOCK_SIZE = 2048  # tunable: 512, 1024, 2048, 4096, 8192
NUM_WARPS = 8  # tunable: 4, 8, 16

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scale_bias_gelu_flat_kernel(x_ptr, scale_ptr, bias_ptr, out_ptr, n_elements, n_cols,
                                 BLOCK_SIZE: tl.constexpr):
    # flat 1-D launch over all elements; the feature index comes from a modulo
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    cols = offs % n_cols
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
        out = torch.empty_like(x)
        n = x.numel()
        grid = (triton.cdiv(n, BLOCK_SIZE),)
        _scale_bias_gelu_flat_kernel[grid](x, self.scale, self.bias, out, n, x.shape[-1],
                                           BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)
        return out
