import torch
import torch.nn as nn


class Model(nn.Module):
    """GroupNorm on an NCHW activation with a learned (non-trivial) per-channel affine transform."""

    def __init__(self, num_groups, num_channels):
        super().__init__()
        self.gn = nn.GroupNorm(num_groups, num_channels, eps=1e-5)
        with torch.no_grad():
            self.gn.weight.copy_(torch.randn(num_channels) * 0.5 + 1.0)
            self.gn.bias.copy_(torch.randn(num_channels) * 0.5)

    def forward(self, x):
        return self.gn(x)


batch_size = 32
channels = 128
num_groups = 16
height = 64
width = 64


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [num_groups, channels]
