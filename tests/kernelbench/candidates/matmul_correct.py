# 1_Matmul: a correct candidate (torch.mm instead of torch.matmul).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, A, B):
        return torch.mm(A, B)
