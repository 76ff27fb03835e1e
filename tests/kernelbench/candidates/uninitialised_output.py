# 12_Tril: writes only the lower triangle of an uninitialised output and relies on the rest being
# zero. Whether it is depends on what the allocator hands back (fresh pages are zero), so the
# faithful verdict is luck; with torch's NaN fill of uninitialised memory the upper triangle
# turns NaN and the strict poison check flags it.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x):
        n = x.shape[0]
        out = torch.empty_like(x)
        rows, cols = torch.tril_indices(n, n, device=x.device)
        out[rows, cols] = x[rows, cols]
        return out
