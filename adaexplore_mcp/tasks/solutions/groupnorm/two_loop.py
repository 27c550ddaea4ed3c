BLOCK_SIZE = 4096  # tunable: 512, 1024, 2048, 4096
NUM_WARPS = 8  # tunable: 4, 8, 16

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _groupnorm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, C, HW, G, group_size, eps, BLOCK_SIZE: tl.constexpr):
    # one program per (sample, group); the group is a contiguous chunk of (C/G)*HW elements
    pid = tl.program_id(0)
    g = pid % G
    base = pid.to(tl.int64) * group_size
    cpg = C // G
    acc = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
    for i0 in range(0, group_size, BLOCK_SIZE):
        offs = i0 + tl.arange(0, BLOCK_SIZE)
        acc += tl.load(x_ptr + base + offs, mask=offs < group_size, other=0.0)
    mean = tl.sum(acc, axis=0) / group_size
    acc2 = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
    for i0 in range(0, group_size, BLOCK_SIZE):
        offs = i0 + tl.arange(0, BLOCK_SIZE)
        mask = offs < group_size
        x = tl.load(x_ptr + base + offs, mask=mask, other=0.0)
        d = tl.where(mask, x - mean, 0.0)
        acc2 += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc2, axis=0) / group_size + eps)
    for i0 in range(0, group_size, BLOCK_SIZE):
        offs = i0 + tl.arange(0, BLOCK_SIZE)
        mask = offs < group_size
        ch = g * cpg + offs // HW
        x = tl.load(x_ptr + base + offs, mask=mask, other=0.0)
        w = tl.load(w_ptr + ch, mask=mask, other=0.0)
        b = tl.load(b_ptr + ch, mask=mask, other=0.0)
        tl.store(out_ptr + base + offs, (x - mean) * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_groups, num_channels):
        super().__init__()
        self.gn = nn.GroupNorm(num_groups, num_channels, eps=1e-5)
        with torch.no_grad():  # as the reference builds it (same seed)
            self.gn.weight.copy_(torch.randn(num_channels) * 0.5 + 1.0)
            self.gn.bias.copy_(torch.randn(num_channels) * 0.5)

    def forward(self, x):
        x = x.contiguous()
        N, C = x.shape[0], x.shape[1]
        HW = x.numel() // (N * C)
        G = self.gn.num_groups
        group_size = (C // G) * HW
        out = torch.empty_like(x)
        _groupnorm_kernel[(N * G,)](x, self.gn.weight, self.gn.bias, out, C, HW, G, group_size,
                                    float(self.gn.eps), BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)
        return out
