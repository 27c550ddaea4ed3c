import torch
import torch.nn as nn


class Model(nn.Module):
    """Scaled matrix product plus a residual: alpha * (A @ B) + R."""

    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, A, B, R):
        return torch.matmul(A, B) * self.alpha + R


M = 2048
K = 2048
N = 2048
alpha = 0.125


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N), torch.randn(M, N)]


def get_init_inputs():
    return [alpha]
