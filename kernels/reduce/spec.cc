// The reduce kernel types: y[r] = sum(x[r, :]) ("reduce") and y[r] = max(x[r, :]) ("reduce_max")
// over the last dim of a [rows, cols] tensor; y has rows elements of x's dtype.
//
// cpu entry:  extern "C" int ak_reduce_cpu(const void* in, void* out, int64_t rows, int64_t cols,
//                                          int dtype)   // dtype: DType value; 0 = success
// cuda entry: extern "C" __global__ void ak_reduce(const void* in, void* out, long long rows,
//                                                  long long cols)   // dtype via -DAK_DTYPE
// One source serves both ops: reduce_max's starter is the same text behind
// "#define AK_REDUCE_MAX 1". See reduce_cpu.cc and reduce.cu for the tunables.
#include <algorithm>
#include <string>

#include "kernels/reduce/sources.h"
#include "kernels/registry.h"

namespace ak::kernels::reduce {
namespace {

double flops(const std::vector<int64_t>& shape) { return double(shape.at(0)) * double(shape.at(1)); }

double bytes(const std::vector<int64_t>& shape, DType dtype) {
  // read the input once, write one value per row
  return (double(shape.at(0)) * double(shape.at(1)) + double(shape.at(0))) * dtype_bytes(dtype);
}

std::string check_shape(const std::vector<int64_t>& shape) { return check_rows_cols("reduce", shape); }

std::vector<Tunable> cuda_space() { return row_cuda_space(256, {1, 2, 4, 8}, 4); }

std::string triton_signature(DType d) {
  const std::string t = dtype_name(d);
  return "x_ptr:*" + t + ",y_ptr:*" + t + ",rows:i64,cols:i64";
}

// reduce_max: prefix "#define AK_REDUCE_MAX 1\n" for the C++ sources, REDUCE_MAX=1 for Triton's.
KernelSpec make(const std::string& name, const std::string& prefix, int64_t reduce_max) {
  KernelSpec k;
  k.name = name;
  k.dtypes = {DType::kF32, DType::kF16, DType::kBF16};
  k.backends[Backend::kCpu] = BackendSource{
      prefix + std::string(kCpuSource),
      "ak_reduce_cpu",
      row_cpu_space(),
      {{64, 1024}, {256, 4096}, {1024, 1000}},
  };
  k.backends[Backend::kCuda] = BackendSource{
      prefix + std::string(kCudaSource),
      "ak_reduce",
      cuda_space(),
      {{4096, 4096}, {8192, 32000}, {65536, 1024}, {1000, 1023}},
  };
  // REDUCE_MAX is the op, not a tuning choice: one value, fixed by the type.
  k.backends[Backend::kTriton] = BackendSource{
      std::string(kTritonSource),
      "reduce_kernel",
      {
          {"BLOCK", {1024, 2048, 4096}, 2048},
          {"REDUCE_MAX", {reduce_max}, reduce_max},
          {"AK_NUM_WARPS", {4, 8, 16}, 8},
          {"AK_NUM_STAGES", {1, 2}, 1},
      },
      {{4096, 4096}, {8192, 32000}, {65536, 1024}, {1000, 1023}},
  };
  k.triton_grid = one_program_per_row;
  k.triton_signature = triton_signature;
  k.triton_divisible = {"x_ptr", "y_ptr", "cols"};
  k.flops = flops;
  k.bytes = bytes;
  k.check_shape = check_shape;
  k.cuda_geometry = row_geometry_for<cuda_space>;
  // Static shared memory: the block reduction's 33 floats (reduce.cu), whatever the
  // configuration and dtype (measured: tests/worker/compiler_test.cc).
  k.cuda_static_shared_bytes = 132;
  k.edge_shapes = row_edge_shapes();
  return k;
}

}  // namespace

KernelSpec make_sum_spec() {
  KernelSpec k = make("reduce", "", 0);
  // Checked as |out - ref| <= atol * sum|x| + rtol * |ref| (the harness's tolerance_scale): a
  // row sum's rounding error grows with its terms, not with the sum, which may cancel to 0.
  // atol: fp32 accumulation in partial sums of a few hundred terms (~2^-24 * sqrt(n) of sum|x|)
  // with a margin; rtol: one rounding of the output to its dtype (fp16 2^-11, bf16 2^-8), twice
  // for the reference's own rounding from fp64.
  k.tolerance = {
      {DType::kF32, {4e-6, 1e-6}},
      {DType::kF16, {4e-6, 2e-3}},
      {DType::kBF16, {4e-6, 1.6e-2}},
  };
  return k;
}

KernelSpec make_max_spec() {
  KernelSpec k = make("reduce_max", "#define AK_REDUCE_MAX 1\n", 1);
  // The max is one of the inputs: exact in every dtype.
  k.tolerance = {
      {DType::kF32, {0, 0}},
      {DType::kF16, {0, 0}},
      {DType::kBF16, {0, 0}},
  };
  return k;
}

}  // namespace ak::kernels::reduce
