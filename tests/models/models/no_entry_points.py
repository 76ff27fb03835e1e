import torch

class Net(torch.nn.Module):
    def forward(self, x):
        return x * 2
