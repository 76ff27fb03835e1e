import torch
import torch.nn as nn


class Model(nn.Module):
    """
    y = x * alpha + beta, with alpha a Python float and beta a Python int passed as inputs.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor, alpha: float, beta: int) -> torch.Tensor:
        return x * alpha + beta


batch_size = 8
dim = 128


def get_inputs():
    return [torch.randn(batch_size, dim), 0.5, 3]


def get_init_inputs():
    return []
