# 10_Chunk: a correct candidate returning a list of tensors.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, chunks):
        super(ModelNew, self).__init__()
        self.chunks = chunks

    def forward(self, x):
        y = x + x
        width = y.shape[1] // self.chunks
        return [y[:, i * width:(i + 1) * width] for i in range(self.chunks)]
