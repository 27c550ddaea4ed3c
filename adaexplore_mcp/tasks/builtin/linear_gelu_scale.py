import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Fully connected layer, exact GELU, then multiplication by a constant."""

    def __init__(self, in_features, out_features, scale_factor):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale_factor = scale_factor

    def forward(self, x):
        return F.gelu(self.linear(x)) * self.scale_factor


batch_size = 1024
in_features = 2048
out_features = 4096
scale_factor = 2.0


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale_factor]
