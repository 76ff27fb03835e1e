# level3 1_MLP: a correct candidate; the layers are created in the reference's order (same
# weights under the same seed) and applied with F.linear and relu.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        super(ModelNew, self).__init__()
        sizes = [input_size] + list(layer_sizes) + [output_size]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = F.linear(x, layer.weight, layer.bias)
            if i + 1 < len(self.layers):
                x = torch.relu(x)
        return x
