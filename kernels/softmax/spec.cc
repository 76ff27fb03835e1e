// The softmax kernel type: y[r, :] = softmax(x[r, :]) over the last dim of a [rows, cols] tensor.
//
// cpu entry:  extern "C" int ak_softmax_cpu(const void* in, void* out, int64_t rows, int64_t cols,
//                                           int dtype)   // dtype: DType value; 0 = success
// cuda entry: extern "C" __global__ void ak_softmax(const void* in, void* out, long long rows,
//                                                   long long cols)   // dtype via -DAK_DTYPE
// Both read `in` and write `out`, contiguous row-major, same dtype; see softmax_cpu.cc and
// softmax.cu for the tunables.
#include <algorithm>
#include <string>

#include "kernels/registry.h"
#include "kernels/softmax/sources.h"

namespace ak::kernels::softmax {
namespace {

double flops(const std::vector<int64_t>& shape) {
  // per element: max, subtract, exp, sum, divide
  return 5.0 * double(shape.at(0)) * double(shape.at(1));
}

double bytes(const std::vector<int64_t>& shape, DType dtype) {
  // read the input once, write the output once
  return 2.0 * double(shape.at(0)) * double(shape.at(1)) * dtype_bytes(dtype);
}

std::string check_shape(const std::vector<int64_t>& shape) { return check_rows_cols("softmax", shape); }

std::vector<Tunable> cuda_space() {
  std::vector<Tunable> space = row_cuda_space(256, {1, 2, 4, 8}, 4);
  space.push_back({"AK_CACHE", {0, 2, 4, 8, 16}, 0});
  return space;
}

std::string triton_signature(DType d) {
  const std::string t = dtype_name(d);
  return "x_ptr:*" + t + ",y_ptr:*" + t + ",rows:i64,cols:i64";
}

}  // namespace

KernelSpec make_spec() {
  KernelSpec k;
  k.name = "softmax";
  k.dtypes = {DType::kF32, DType::kF16, DType::kBF16};
  k.backends[Backend::kCpu] = BackendSource{
      std::string(kCpuSource),
      "ak_softmax_cpu",
      {
          {"AK_VEC", {1, 4, 8, 16}, 8},
          {"AK_ONLINE", {0, 1}, 0},
          {"AK_ROWS_PER_TILE", {1, 2, 4}, 1},
      },
      {{64, 1024}, {256, 4096}, {1024, 1000}},
  };
  k.backends[Backend::kCuda] = BackendSource{
      std::string(kCudaSource),
      "ak_softmax",
      cuda_space(),
      {{4096, 4096}, {4096, 50257}, {8192, 32000}, {1000, 1023}},
  };
  k.backends[Backend::kTriton] = BackendSource{
      std::string(kTritonSource),
      "softmax_kernel",
      row_triton_space({512, 1024, 2048, 4096}, 2048, 8),
      {{4096, 4096}, {4096, 50257}, {8192, 32000}, {1000, 1023}},
  };
  k.triton_grid = one_program_per_row;
  k.triton_signature = triton_signature;
  k.triton_divisible = {"x_ptr", "y_ptr", "cols"};
  // Outputs are in (0, 1]; the reference is fp64. fp32: a serial fp32 sum over a 4096-wide row
  // (the cpu source at AK_VEC=1) reaches ~8e-6 relative in the worst of 256 rows, so rtol 2e-5
  // keeps a 2x margin while real bugs (a skipped element, no max subtraction) miss by orders of
  // magnitude; atol stays far below 1/cols of the widest default rows. fp16/bf16: one rounding
  // of the output (2^-11 resp. 2^-8 relative) on top of the fp32 computation.
  k.tolerance = {
      {DType::kF32, {1e-6, 2e-5}},
      {DType::kF16, {1e-5, 2e-3}},
      {DType::kBF16, {1e-5, 1.6e-2}},
  };
  k.flops = flops;
  k.bytes = bytes;
  k.check_shape = check_shape;
  k.cuda_geometry = row_geometry_for<cuda_space>;
  // Static shared memory: the block reduction's 33 (max, sum) pairs of floats (softmax.cu),
  // whatever the configuration and dtype (measured: tests/worker/compiler_test.cc).
  k.cuda_static_shared_bytes = 264;
  // Rows and columns that divide by no vector width, warp or block size, a single element, and
  // a row longer than any tile.
  k.edge_shapes = row_edge_shapes();
  return k;
}

}  // namespace ak::kernels::softmax
