BLOCK_HW = 1024  # tunable: 256, 512, 1024, 2048
NUM_WARPS = 8  # tunable: 2, 4, 8

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _bias_relu_bias_kernel(y_ptr, conv_b_ptr, b_ptr, out_ptr, C, HW, BLOCK_HW: tl.constexpr):
    # grid: (N*C planes, HW tiles); the two per-channel scalars are loaded once per program
    plane = tl.program_id(0)
    c = plane % C
    offs = tl.program_id(1) * BLOCK_HW + tl.arange(0, BLOCK_HW)
    mask = offs < HW
    base = plane.to(tl.int64) * HW
    cb = tl.load(conv_b_ptr + c)
    b = tl.load(b_ptr + c)
    y = tl.load(y_ptr + base + offs, mask=mask, other=0.0)
    tl.store(out_ptr + base + offs, tl.maximum(y + cb, 0.0) + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.1)  # as the reference builds it (same seed)

    def forward(self, x):
        # the convolution itself stays in cuDNN (no bias); bias + ReLU + bias are one Triton pass
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding, self.conv.dilation,
                     self.conv.groups)
        N, C, H, W = y.shape
        HW = H * W
        grid = (N * C, triton.cdiv(HW, BLOCK_HW))
        _bias_relu_bias_kernel[grid](y, self.conv.bias, self.bias, y, C, HW, BLOCK_HW=BLOCK_HW,
                                     num_warps=NUM_WARPS)
        return y
