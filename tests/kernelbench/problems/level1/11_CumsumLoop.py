import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Inclusive prefix sum along dim 1, written as one reduction per output column: correct but
    slow (quadratic work and one Python iteration per column), so a plain torch.cumsum is far
    more than 10x faster. The inputs are non-negative, so no cancellation and a different
    summation order stays inside the fp32 tolerance.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        columns = [x[:, : i + 1].sum(dim=1) for i in range(x.shape[1])]
        return torch.stack(columns, dim=1)


batch_size = 8
dim = 1024


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
