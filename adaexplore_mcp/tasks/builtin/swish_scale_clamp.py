import torch
import torch.nn as nn


class Model(nn.Module):
    """Swish (x * sigmoid(x)), scaled by a constant, then clamped to [clamp_min, clamp_max]."""

    def __init__(self, scale, clamp_min, clamp_max):
        super().__init__()
        self.scale = scale
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        y = x * torch.sigmoid(x)
        y = y * self.scale
        return torch.clamp(y, min=self.clamp_min, max=self.clamp_max)


batch_size = 4096
dim = 8192
scale = 1.5
clamp_min = -0.25
clamp_max = 2.5


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [scale, clamp_min, clamp_max]
