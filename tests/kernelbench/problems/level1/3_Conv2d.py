import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Performs a standard 2D convolution (square input, square kernel).
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int = 0):
        super(Model, self).__init__()
        self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2d(x)


batch_size = 2
in_channels = 3
out_channels = 8
kernel_size = 3
height = 16
width = 16


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
