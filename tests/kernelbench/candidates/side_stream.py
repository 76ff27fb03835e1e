# 1_Matmul (CUDA only): a cheat that queues its work on a side stream behind ~ms of busy work
# and returns at once. KernelBench records its events on the current stream, so its timing sees
# only the launches; its correctness check synchronises the whole device, so the values are
# right. The strict side-stream check copies the output after synchronising only the current
# stream, before the side stream has written it.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        self.side = torch.cuda.Stream()
        self.busy = None

    def forward(self, A, B):
        if self.busy is None or self.busy.device != A.device:
            self.busy = torch.randn(4096, 4096, dtype=A.dtype, device=A.device)
        out = torch.empty(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)
        self.side.wait_stream(torch.cuda.current_stream())  # the inputs are ready
        with torch.cuda.stream(self.side):
            torch.mm(self.busy, self.busy)  # milliseconds of GPU work that nobody waits for
            torch.mm(A, B, out=out)
        return out
