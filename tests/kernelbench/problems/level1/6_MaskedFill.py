import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Zeroes the elements where a boolean mask is false.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return x.masked_fill(~mask, 0.0)


batch_size = 8
dim = 64


def get_inputs():
    x = torch.randn(batch_size, dim)
    mask = torch.rand(batch_size, dim) > 0.5
    return [x, mask]


def get_init_inputs():
    return []
