# 7_ScaleShift (CUDA only): a CUDA C++ kernel built with load_inline, as KernelBench's examples
# do; the harness points TORCH_EXTENSIONS_DIR at the request's build_dir.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void scale_shift_kernel(const float* x, float* out, float alpha, float beta, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] * alpha + beta;
}

torch::Tensor scale_shift_cuda(torch::Tensor x, double alpha, double beta) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    int64_t n = xc.numel();
    const int threads = 256;
    const int blocks = (int)((n + threads - 1) / threads);
    scale_shift_kernel<<<blocks, threads>>>(xc.data_ptr<float>(), out.data_ptr<float>(), (float)alpha,
                                            (float)beta, n);
    return out;
}
"""

cpp_source = "torch::Tensor scale_shift_cuda(torch::Tensor x, double alpha, double beta);"

scale_shift = load_inline(
    name="scale_shift",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["scale_shift_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x, alpha, beta):
        return scale_shift.scale_shift_cuda(x, float(alpha), float(beta))
