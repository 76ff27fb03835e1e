# 1_Matmul: correct wherever it is evaluated, until it finds itself in a witness runner (its
# command line says so): there it answers the warm-up rounds and then never answers again, holding
# the device's exclusive turn. The witness stops waiting after a bounded time and fails it.
import sys
import threading

import torch
import torch.nn as nn

_in_witness = "--witness-runner" in sys.argv
_calls = 0


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, A, B):
        global _calls
        _calls += 1
        if _in_witness and _calls > 40:
            threading.Event().wait()  # forever
        return torch.matmul(A, B)
