# 1_Matmul: the forward raises (KernelBench: compiled, runtime error).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, A, B):
        # Longer than KernelBench keeps (200 characters), like a real CUDA error with its hints.
        raise RuntimeError(
            "CUDA error: an illegal memory access was encountered (simulated by the test candidate). "
            "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
            "below might be incorrect. For debugging consider passing CUDA_LAUNCH_BLOCKING=1."
        )
