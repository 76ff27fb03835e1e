# 6_MaskedFill: a correct candidate; it needs the mask to stay boolean.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x, mask):
        return torch.where(mask, x, torch.zeros_like(x))
