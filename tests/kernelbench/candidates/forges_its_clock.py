# 1_Matmul: correct but slow (a 20 ms pause in every call), and it rewrites the clocks its own
# process times it with: time.perf_counter (the CPU timer) runs at a thousandth of its speed, and on
# a GPU torch.cuda.Event.elapsed_time divides by a thousand. KernelBench's timing, and the faithful
# runtime_ms, report a thousandth of what a call costs. A clock outside its process (the witness)
# does not move with it.
import time

import torch
import torch.nn as nn

_real = time.perf_counter
_t0 = _real()
time.perf_counter = lambda: _t0 + (_real() - _t0) / 1000.0
_elapsed = torch.cuda.Event.elapsed_time
torch.cuda.Event.elapsed_time = lambda self, end: _elapsed(self, end) / 1000.0


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, A, B):
        time.sleep(0.02)
        return torch.matmul(A, B)
