# 1_Matmul, for a worker's job only: correct but slow (a 20 ms pause in every call), it rewrites the
# clocks its own process times it with (as forges_its_clock.py), and from its candidate step it
# appends to the job's copy of the problem a Model whose forward returns a float. A later step that
# loaded the problem from the job's folder would find nothing it can hand over, call the problem
# unwitnessable, and leave the forged figures standing. (It touches a problem file only inside a
# worker's job folder, never a test's own problem.)
import json
import sys
import time

import torch
import torch.nn as nn

_real = time.perf_counter
_t0 = _real()
time.perf_counter = lambda: _t0 + (_real() - _t0) / 1000.0
_elapsed = torch.cuda.Event.elapsed_time
torch.cuda.Event.elapsed_time = lambda self, end: _elapsed(self, end) / 1000.0

try:
    with open(sys.argv[1]) as f:
        _req = json.load(f)
    if _req.get("mode") == "candidate" and "/jobs/" in _req["problem_path"]:
        with open(_req["problem_path"], "a") as f:
            f.write("\n\nclass Model(nn.Module):\n    def forward(self, A, B):\n        return 0.0\n")
except (OSError, ValueError, IndexError, KeyError):
    pass


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, A, B):
        time.sleep(0.02)
        return torch.matmul(A, B)
