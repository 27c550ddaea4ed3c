import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Per-feature affine transform followed by exact (erf) GELU: gelu(x * scale + bias)."""

    def __init__(self, dim):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(dim) * 0.5 + 1.0)
        self.bias = nn.Parameter(torch.randn(dim) * 0.5)

    def forward(self, x):
        return F.gelu(x * self.scale + self.bias)


batch_size = 4096
dim = 8192


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]
