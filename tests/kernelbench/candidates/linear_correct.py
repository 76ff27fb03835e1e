# 2_Linear: a correct candidate. Built with the same seed as the reference, its nn.Linear gets
# the same weights; the forward is an explicit addmm.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.addmm(self.linear.bias, x, self.linear.weight.t())
