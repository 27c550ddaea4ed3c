BLOCK_SIZE = 1024  # tunable: 256, 512, 1024, 2048, 4096
NUM_PROGRAMS = 1056  # tunable: 264, 528, 1056, 2112, 4224
NUM_WARPS = 4  # tunable: 4, 8

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _swish_scale_clamp_persistent(x_ptr, out_ptr, n_elements, scale, lo, hi, num_tiles, num_programs,
                                  BLOCK_SIZE: tl.constexpr):
    # persistent grid-stride loop: a fixed number of programs walks over all tiles
    pid = tl.program_id(0)
    for tile in range(pid, num_tiles, num_programs):
        offs = tile * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)  # int32: fine below 2**31 elements
        mask = offs < n_elements
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
        y = x / (1.0 + tl.exp(-x)) * scale
        y = tl.minimum(tl.maximum(y, lo), hi)
        tl.store(out_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale, clamp_min, clamp_max):
        super().__init__()
        self.scale = scale
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        num_tiles = triton.cdiv(n, BLOCK_SIZE)
        programs = max(1, min(NUM_PROGRAMS, num_tiles))
        _swish_scale_clamp_persistent[(programs,)](x, out, n, float(self.scale), float(self.clamp_min),
                                                   float(self.clamp_max), num_tiles, programs,
                                                   BLOCK_SIZE=BLOCK_SIZE, num_warps=NUM_WARPS)
        return out
