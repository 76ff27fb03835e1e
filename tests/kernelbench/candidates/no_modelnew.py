# 1_Matmul: defines no ModelNew (KernelBench: compilation failure).
import torch
import torch.nn as nn


class ModelOptimized(nn.Module):
    def __init__(self):
        super(ModelOptimized, self).__init__()

    def forward(self, A, B):
        return torch.mm(A, B)
