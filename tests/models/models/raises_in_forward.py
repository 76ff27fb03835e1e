import torch

class Net(torch.nn.Module):
    def forward(self, x):
        raise ValueError("forward refuses on purpose")

def build_model():
    return Net()

def example_inputs():
    return (torch.randn(4, 4),)
