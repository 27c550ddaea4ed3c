import torch
import torch.nn as nn


class Model(nn.Module):
    """2-D average pooling, 2x2 window, stride 2."""

    def __init__(self, kernel_size, stride):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel_size=kernel_size, stride=stride)

    def forward(self, x):
        return self.pool(x)


batch_size = 32
channels = 64
height = 128
width = 128
kernel_size = 2
stride = 2


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [kernel_size, stride]
