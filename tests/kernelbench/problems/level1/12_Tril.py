import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Lower-triangular part of a square matrix (the rest is zero).
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tril(x)


N = 256


def get_inputs():
    return [torch.randn(N, N)]


def get_init_inputs():
    return []
