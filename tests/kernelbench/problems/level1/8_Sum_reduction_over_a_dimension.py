import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Simple model that performs sum reduction over a specified dimension.
    """

    def __init__(self, dim: int):
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


batch_size = 4
dim1 = 64
dim2 = 32
reduce_dim = 1


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
