# 11_CumsumLoop: a legitimately fast candidate (one cumsum instead of one reduction per column);
# the reference is slow on purpose, so KernelBench's excessive-speedup flag (> 10x) goes up.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x):
        return torch.cumsum(x, dim=1)
