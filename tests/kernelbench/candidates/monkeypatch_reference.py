# 1_Matmul: a cheat. Loaded into the same namespace as the problem (KernelBench's exec), it
# rebinds the reference Model's forward to return zeros, and returns zeros itself: the faithful
# check compares zeros with zeros and says correct. Only a reference computed in another
# process (the judge) sees it.
import torch
import torch.nn as nn


def _zeros(self, A, B):
    return torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)


Model.forward = _zeros  # noqa: F821 - Model is the problem's class, in the shared namespace


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, A, B):
        return torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)
