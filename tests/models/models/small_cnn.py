"""A model that is not among the examples, written for the tests: a small CNN with a classifier
head (conv, batch norm, ReLU, pooling, a softmax over classes), in KernelBench's contract."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels, classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, channels, 3, padding=1), nn.BatchNorm2d(channels), nn.ReLU(),
            nn.MaxPool2d(2), nn.Conv2d(channels, 2 * channels, 3, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(2 * channels, classes)

    def forward(self, x):
        return torch.softmax(self.head(self.features(x).flatten(1)), dim=-1)


def get_init_inputs():
    return [16, 10]


def get_inputs():
    return [torch.randn(8, 3, 32, 32)]
