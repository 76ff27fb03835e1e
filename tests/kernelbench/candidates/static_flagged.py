# 9_Softmax: correct, but written with a try/except fallback and a thread lock, which
# KernelBench's static checker forbids (code_bypass, thread_injection).
import threading

import torch
import torch.nn as nn

_lock = threading.Lock()


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x):
        try:
            with _lock:
                return torch.softmax(x, dim=1)
        except RuntimeError:
            return torch.softmax(x.float(), dim=1)
