# 4_TopK: a correct candidate returning a tuple (values, indices) by sorting.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, k):
        super(ModelNew, self).__init__()
        self.k = k

    def forward(self, x):
        values, indices = torch.sort(x, dim=-1, descending=True)
        return values[..., : self.k], indices[..., : self.k]
