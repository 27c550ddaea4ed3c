BLOCK_M = 128  # tunable: 32, 64, 128
BLOCK_N = 64  # tunable: 16, 32, 64
BLOCK_K = 32  # tunable: 16, 32
NUM_WARPS = 4  # tunable: 4, 8
NUM_STAGES = 3  # tunable: 2, 3

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _conv2d_relu_bias_kernel(x_ptr, w_ptr, cb_ptr, b_ptr, out_ptr,
                             NB, C_in, H, W, C_out, OH, OW, KH: tl.constexpr, KW: tl.constexpr,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # implicit GEMM: rows = (n, oh, ow) output pixels, cols = output channels,
    # reduction = (c_in, kh, kw); stride 1, no padding; epilogue: + conv bias, ReLU, + bias
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    M = NB * OH * OW
    K = C_in * KH * KW
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    n_idx = rm // (OH * OW)
    pix = rm % (OH * OW)
    oh = pix // OW
    ow = pix % OW
    x_row = n_idx.to(tl.int64) * C_in * H * W + oh * W + ow
    mmask = rm < M
    nmask = rn < C_out
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        kmask = kk < K
        ci = kk // (KH * KW)
        kr = kk % (KH * KW)
        kh = kr // KW
        kw = kr % KW
        x_col = ci * H * W + kh * W + kw
        a = tl.load(x_ptr + x_row[:, None] + x_col[None, :], mask=mmask[:, None] & kmask[None, :], other=0.0)
        b = tl.load(w_ptr + rn[None, :] * K + kk[:, None], mask=kmask[:, None] & nmask[None, :], other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    cb = tl.load(cb_ptr + rn, mask=nmask, other=0.0)
    bb = tl.load(b_ptr + rn, mask=nmask, other=0.0)
    y = tl.maximum(acc + cb[None, :], 0.0) + bb[None, :]
    out_off = n_idx.to(tl.int64)[:, None] * C_out * OH * OW + rn[None, :] * (OH * OW) + pix[:, None]
    tl.store(out_ptr + out_off, y, mask=mmask[:, None] & nmask[None, :])


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.1)  # as the reference builds it (same seed)

    def forward(self, x):
        x = x.contiguous()
        w = self.conv.weight.contiguous()
        NB, C_in, H, W = x.shape
        C_out, _, KH, KW = w.shape
        OH, OW = H - KH + 1, W - KW + 1
        out = torch.empty((NB, C_out, OH, OW), device=x.device, dtype=torch.float32)
        grid = (triton.cdiv(NB * OH * OW, BLOCK_M), triton.cdiv(C_out, BLOCK_N))
        _conv2d_relu_bias_kernel[grid](x, w, self.conv.bias, self.bias, out, NB, C_in, H, W, C_out, OH, OW,
                                       KH=KH, KW=KW, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                                       num_warps=NUM_WARPS, num_stages=NUM_STAGES)
        return out
