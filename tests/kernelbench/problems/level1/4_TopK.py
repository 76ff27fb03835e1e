import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Returns the k largest values along the last dimension and their indices: a tuple output
    (float values, int64 indices).
    """

    def __init__(self, k: int):
        super(Model, self).__init__()
        self.k = k

    def forward(self, x: torch.Tensor):
        values, indices = torch.topk(x, self.k, dim=-1)
        return values, indices


batch_size = 8
dim = 32
k = 4


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [k]
