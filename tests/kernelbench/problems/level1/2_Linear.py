import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A single fully connected layer (y = x W^T + b), with its weights as parameters.
    """

    def __init__(self, in_features: int, out_features: int):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


batch_size = 16
in_features = 64
out_features = 32


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
