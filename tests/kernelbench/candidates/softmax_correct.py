# 9_Softmax: a correct candidate (max-subtracted exponentials, normalised).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x):
        e = torch.exp(x - x.max(dim=1, keepdim=True).values)
        return e / e.sum(dim=1, keepdim=True)
