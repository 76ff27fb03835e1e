// The rmsnorm kernel type: y = x * rsqrt(mean(x^2, last dim) + 1e-6) * w for x [rows, cols] and
// a weight w [cols], one dtype for all three (as in LLaMA-style models). rmsnorm_e5 is the same
// with eps 1e-5 (with_eps in kernels/registry.h).
//
// cpu entry:  extern "C" int ak_rmsnorm_cpu(const void* x, const void* w, void* y, int64_t rows,
//                                           int64_t cols, int dtype)   // 0 = success
// cuda entry: extern "C" __global__ void ak_rmsnorm(const void* x, const void* w, void* y,
//                                                   long long rows, long long cols)
// See rmsnorm_cpu.cc and rmsnorm.cu for the tunables.
#include <string>

#include "kernels/registry.h"
#include "kernels/rmsnorm/sources.h"

namespace ak::kernels::rmsnorm {
namespace {

double flops(const std::vector<int64_t>& shape) {
  // per element: square-accumulate (2), scale by rstd and by the weight (2)
  return 4.0 * double(shape.at(0)) * double(shape.at(1));
}

double bytes(const std::vector<int64_t>& shape, DType dtype) {
  // x read once, y written once, the weight read once
  return (2.0 * double(shape.at(0)) + 1.0) * double(shape.at(1)) * dtype_bytes(dtype);
}

std::string check_shape(const std::vector<int64_t>& shape) { return check_rows_cols("rmsnorm", shape); }

std::vector<Tunable> cuda_space() {
  std::vector<Tunable> space = row_cuda_space(256, {1, 2, 4, 8}, 8);
  space.push_back({"AK_CACHE", {0, 2, 4, 8, 16}, 0});
  return space;
}

std::string triton_signature(DType d) {
  const std::string t = dtype_name(d);
  return "x_ptr:*" + t + ",w_ptr:*" + t + ",y_ptr:*" + t + ",rows:i64,cols:i64";
}

}  // namespace

KernelSpec make_spec() {
  KernelSpec k;
  k.name = "rmsnorm";
  k.dtypes = {DType::kF32, DType::kF16, DType::kBF16};
  k.backends[Backend::kCpu] = BackendSource{
      std::string(kCpuSource),
      "ak_rmsnorm_cpu",
      row_cpu_space(),
      {{64, 1024}, {256, 4096}, {1024, 1000}},
  };
  // LLM hidden sizes: 4096 (7B), 8192 (70B) over 4k-16k tokens.
  k.backends[Backend::kCuda] = BackendSource{
      std::string(kCudaSource),
      "ak_rmsnorm",
      cuda_space(),
      {{4096, 4096}, {16384, 4096}, {8192, 8192}, {1000, 1023}},
  };
  k.backends[Backend::kTriton] = BackendSource{
      std::string(kTritonSource),
      "rmsnorm_kernel",
      row_triton_space({512, 1024, 2048, 4096}, 1024, 4),
      {{4096, 4096}, {16384, 4096}, {8192, 8192}, {1000, 1023}},
  };
  k.triton_grid = one_program_per_row;
  k.triton_signature = triton_signature;
  k.triton_divisible = {"x_ptr", "w_ptr", "y_ptr", "cols"};
  // Outputs are about |w| in size; the reference is fp64. fp32: an fp32 sum of squares and
  // rsqrtf (2 ulp) stay near 1e-6 relative. fp16/bf16: one rounding of the output (2^-11 resp.
  // 2^-8 relative), and the reference's own rounding to the dtype, on top.
  k.tolerance = {
      {DType::kF32, {1e-5, 1e-5}},
      {DType::kF16, {1e-4, 2e-3}},
      {DType::kBF16, {1e-3, 1.6e-2}},
  };
  k.flops = flops;
  k.bytes = bytes;
  k.check_shape = check_shape;
  k.cuda_geometry = row_geometry_for<cuda_space>;
  // Static shared memory: the block reduction's 33 floats (rmsnorm.cu), whatever the
  // configuration and dtype (measured: tests/worker/compiler_test.cc).
  k.cuda_static_shared_bytes = 132;
  k.edge_shapes = row_edge_shapes();
  return k;
}

// eps 1e-5: LLaMA 2 and 3, Mistral (their configurations' rms_norm_eps).
KernelSpec make_e5_spec() { return with_eps(make_spec(), "rmsnorm_e5", "1e-6", "1e-5"); }

}  // namespace ak::kernels::rmsnorm
