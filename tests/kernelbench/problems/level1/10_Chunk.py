import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Splits the input into equal chunks along dim 1 and returns them as a list of tensors.
    """

    def __init__(self, chunks: int):
        super(Model, self).__init__()
        self.chunks = chunks

    def forward(self, x: torch.Tensor):
        return list(torch.chunk(x * 2.0, self.chunks, dim=1))


batch_size = 4
dim = 12
chunks = 3


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [chunks]
