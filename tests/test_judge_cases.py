"""Tiny tasks and candidates for the judge tests (sized for the CPU interpreter). No tests here."""

from __future__ import annotations

from pathlib import Path

from adaexplore_mcp.config import JudgeLimits, Settings
from adaexplore_mcp.tasks.format import TaskSpec

AFFINE_TASK = '''
import torch
import torch.nn as nn

N = 512


class Model(nn.Module):
    def forward(self, x):
        return x * 2 + 1


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
'''

# A kernel file header every candidate below shares.
HEADER = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl
'''

AFFINE_KERNEL = '''
@triton.jit
def affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x * 2 + 1, mask=mask)


def affine(x, out=None):
    y = torch.empty_like(x) if out is None else out
    n = x.numel()
    affine_kernel[(triton.cdiv(n, 128),)](x, y, n, BLOCK=128)
    return y
'''


def candidate(forward_body: str, extra: str = "", init: str = "") -> str:
    """A ModelNew whose forward(self, x) is `forward_body` (indented by the caller's 8 spaces)."""
    init_block = f"    def __init__(self):\n        super().__init__()\n{init}\n" if init else ""
    return f"{HEADER}{AFFINE_KERNEL}{extra}\n\nclass ModelNew(nn.Module):\n{init_block}    def forward(self, x):\n{forward_body}\n"


GOOD = candidate("        return affine(x)")

SOFTMAX_TASK = '''
import torch
import torch.nn as nn

rows = 256
cols = 1024


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
'''

SOFTMAX_KERNEL = HEADER + '''
@triton.jit
def softmax_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * cols + offs, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + row * cols + offs, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
'''

LINEAR_TASK = '''
import torch
import torch.nn as nn

batch = 2048
features_in = 2048
features_out = 2048


class Model(nn.Module):
    def __init__(self, fin, fout):
        super().__init__()
        self.linear = nn.Linear(fin, fout)

    def forward(self, x):
        return self.linear(x)


def get_inputs():
    return [torch.randn(batch, features_in)]


def get_init_inputs():
    return [features_in, features_out]
'''
LINEAR_SMALL = {"batch": 8, "features_in": 32, "features_out": 16}

# K is a constexpr: Triton 3.6's interpreter (with numpy >= 2.5) cannot range() over a runtime int.
LINEAR_KERNEL = HEADER + '''
@triton.jit
def linear_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K: tl.constexpr,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(x_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rn[None, :] * K + rk[:, None], mask=(rn[None, :] < N) & (rk[:, None] < K), other=0.0)
        acc += tl.dot(a, w)
    acc += tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, fin, fout):
        super().__init__()
        self.linear = nn.Linear(fin, fout)

    def forward(self, x):
        M, K = x.shape
        N = self.linear.weight.shape[0]
        y = torch.empty((M, N), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))
        linear_kernel[grid](x, self.linear.weight, self.linear.bias, y, M, N, K, BM=64, BN=64, BK=32)
        return y
'''


def task(source: str = AFFINE_TASK, small: dict[str, int] | None = None, name: str = "affine",
         degenerate: bool = False) -> TaskSpec:
    return TaskSpec(task_id=f"t-{name}", name=name, source=source, small_shapes=small or {}, degenerate=degenerate)


def cpu_settings(home: Path, **limits: float) -> Settings:
    """CPU-interpreter settings with few trials so the suite stays fast on two cores."""
    return Settings(home=home, device="cpu", workers=1, cache_dir=home / "kernel-cache",  # never the user's cache
                    limits=JudgeLimits(trials=int(limits.pop("trials", 3)), **limits))


def referee_request(name: str, source: str = "", spec: TaskSpec | None = None) -> dict:
    """An `evaluate` request as the worker hands it to a referee run in the test's own process."""
    from dataclasses import asdict

    spec = spec or task()
    return {"op": "evaluate", "cand_module": f"cand_{name}", "cand_source": source or GOOD,
            "limits": asdict(JudgeLimits()), "timeout_s": 120,
            "task": {"module": f"ref_{name}", "source": spec.source, "degenerate": False, "deterministic": None,
                     "shapes": {}}}
