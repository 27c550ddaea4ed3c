"""Seed rule unmasked-out-of-bounds: Always mask tl.load/tl.store at the tail (mask=offs < n) so no program touches memory past the tensor."""

FORMAT = 1
KEY = 'unmasked-out-of-bounds'
TEXT = 'Always mask tl.load/tl.store with the tensor bounds (mask=offs < n, other=0.0) when the grid covers more elements than the tensor holds.'
SIGNATURES = ['RuntimeError: CUDA error: an illegal memory access was encountered', 'AcceleratorError: CUDA error: an illegal memory access was encountered']  # AcceleratorError: seen on triton-3.6-cuda (torch 2.11); RuntimeError: older torch, unconfirmed
ERROR_LINE = 'RuntimeError: CUDA error: an illegal memory access was encountered'
SEEN = ['triton-3.6-cuda']
GPU_ONLY = True
EXPECTED_GPU_ERROR = 'CUDA error: an illegal memory access was encountered'
GPU_CONFIRMED = ['triton-3.6-cuda']  # EXPECTED_GPU_ERROR seen verbatim (first line of torch.AcceleratorError) on an H200, triton 3.6.0, torch 2.11, 2026-12-02, by a probe kernel, not this file's trigger: tests/fixtures/errors/errors.json id unmasked-out-of-bounds.probe_k3.gpu-3.6

import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))


def trigger(device):
    if not str(device).startswith("cuda"):
        return  # the interpreter reads past the buffer silently or aborts the process: no error text
    x = torch.randn(100, device=device)
    y = torch.empty_like(x)
    copy_kernel[(4096,)](x, y, 100, BLOCK=16384)  # 256 MiB past a 400-byte tensor
