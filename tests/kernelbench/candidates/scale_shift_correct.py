# 7_ScaleShift: a correct candidate taking the Python scalars alpha and beta.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x, alpha, beta):
        return torch.add(torch.mul(x, alpha), beta)
