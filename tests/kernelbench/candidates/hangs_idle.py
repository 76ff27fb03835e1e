# 1_Matmul: the forward never returns, and burns no CPU while it waits (a farm test on a 2-core
# machine times honest samples meanwhile). The harness cannot end it; the worker's timeout kills it.
# hangs.py is the spinning kind.
import signal

import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, A, B):
        while True:
            signal.pause()  # returns only after a handled signal; nothing here handles one
