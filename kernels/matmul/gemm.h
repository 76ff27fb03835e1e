// The matmul starter's GEMM as a building block of other kernel types (kernels/fused_mlp runs it
// three times): its cuda search space and the launch geometry of one GEMM writing a [rows, cols]
// output (matmul.cu's header). Defined in kernels/matmul/spec.cc. No libtorch.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernels/registry.h"

namespace ak::kernels::matmul {

std::vector<Tunable> cuda_space();
// block = AK_WARPS_M * AK_WARPS_N * 32 threads; a 1-D grid of one block per AK_BM x AK_BN tile of
// the output; AK_STAGES stages of an A and a B tile of dynamic shared memory (fp32: A transposed,
// rows padded by 4). A tunable config lacks takes the space's default.
// matmul.cu's #error constraints on its tunables (powers of two, warp and thread tiles, stages,
// 16-byte chunks per thread) as a reason; "" when the configuration compiles.
std::string gemm_config_error(const std::map<std::string, int64_t>& config, DType dtype);
LaunchGeometry gemm_geometry(const std::map<std::string, int64_t>& config, int64_t rows, int64_t cols, DType dtype);
// The TMA path's two maps (AK_WGMMA=2 or 3 in fp16/bf16; else none) for C [m, n] = A [m, k] @ B [k, n],
// A the operand a (a_offset elements in), B the operand b (TensorMapSpec's operand numbers):
// A in boxes of AK_BK x AK_BM, B in 64 x AK_BK, both with the 128-byte swizzle (wgmma_tma.cuh).
std::vector<TensorMapSpec> gemm_tensor_maps(const std::map<std::string, int64_t>& config, uint64_t m, uint64_t n,
                                            uint64_t k, DType dtype, int a, uint64_t a_offset, int b);

}  // namespace ak::kernels::matmul
