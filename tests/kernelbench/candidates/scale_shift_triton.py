# 7_ScaleShift (CUDA only): a Triton kernel; backend "triton" imports it from a temp file.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_shift_kernel(x_ptr, out_ptr, alpha, beta, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * alpha + beta, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x, alpha, beta):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        scale_shift_kernel[(triton.cdiv(n, 1024),)](x, out, float(alpha), float(beta), n, BLOCK=1024)
        return out
