# 1_Matmul: ModelNew's constructor raises (compiled, runtime error, no correctness trials).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        raise ValueError("the test candidate refuses to be built")

    def forward(self, A, B):
        return torch.mm(A, B)
