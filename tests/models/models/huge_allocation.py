import torch

class Net(torch.nn.Module):
    def forward(self, x):
        # 2^40 fp32 elements (4 TiB): more than any GPU has
        return x + torch.empty(1 << 40, device=x.device).sum()

def build_model():
    return Net()

def example_inputs():
    return (torch.randn(4, 4),)
