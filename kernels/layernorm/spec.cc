// The layernorm kernel type: y = (x - mean) * rsqrt(var + 1e-5) * w + b over the last dim of x
// [rows, cols] (biased variance), weight w and bias b [cols], one dtype for all four.
// layernorm_e12 and layernorm_e6 are the same with eps 1e-12 and 1e-6 (with_eps in
// kernels/registry.h).
//
// cpu entry:  extern "C" int ak_layernorm_cpu(const void* x, const void* w, const void* b, void* y,
//                                             int64_t rows, int64_t cols, int dtype)   // 0 = success
// cuda entry: extern "C" __global__ void ak_layernorm(const void* x, const void* w, const void* b,
//                                                     void* y, long long rows, long long cols)
// See layernorm_cpu.cc and layernorm.cu for the tunables.
#include <string>

#include "kernels/registry.h"
#include "kernels/layernorm/sources.h"

namespace ak::kernels::layernorm {
namespace {

double flops(const std::vector<int64_t>& shape) {
  // per element: sum (1), subtract and square-accumulate (3), subtract, scale, weight and bias (4)
  return 8.0 * double(shape.at(0)) * double(shape.at(1));
}

double bytes(const std::vector<int64_t>& shape, DType dtype) {
  // x read once, y written once, weight and bias read once
  return (2.0 * double(shape.at(0)) + 2.0) * double(shape.at(1)) * dtype_bytes(dtype);
}

std::string check_shape(const std::vector<int64_t>& shape) { return check_rows_cols("layernorm", shape); }

std::vector<Tunable> cuda_space() {
  std::vector<Tunable> space = row_cuda_space(256, {1, 2, 4, 8}, 8);
  space.push_back({"AK_CACHE", {0, 2, 4, 8, 16}, 0});
  return space;
}

std::string triton_signature(DType d) {
  const std::string t = dtype_name(d);
  return "x_ptr:*" + t + ",w_ptr:*" + t + ",b_ptr:*" + t + ",y_ptr:*" + t + ",rows:i64,cols:i64";
}

}  // namespace

KernelSpec make_spec() {
  KernelSpec k;
  k.name = "layernorm";
  k.dtypes = {DType::kF32, DType::kF16, DType::kBF16};
  k.backends[Backend::kCpu] = BackendSource{
      std::string(kCpuSource),
      "ak_layernorm_cpu",
      row_cpu_space(),
      {{64, 1024}, {256, 4096}, {1024, 1000}},
  };
  // Transformer hidden sizes: 4096 and 8192 over 4k-16k tokens.
  k.backends[Backend::kCuda] = BackendSource{
      std::string(kCudaSource),
      "ak_layernorm",
      cuda_space(),
      {{4096, 4096}, {16384, 4096}, {8192, 8192}, {1000, 1023}},
  };
  k.backends[Backend::kTriton] = BackendSource{
      std::string(kTritonSource),
      "layernorm_kernel",
      row_triton_space({512, 1024, 2048, 4096}, 1024, 4),
      {{4096, 4096}, {16384, 4096}, {8192, 8192}, {1000, 1023}},
  };
  k.triton_grid = one_program_per_row;
  k.triton_signature = triton_signature;
  k.triton_divisible = {"x_ptr", "w_ptr", "b_ptr", "y_ptr", "cols"};
  // Outputs are about |w| + |b| in size; the reference is fp64. fp32: fp32 sums and rsqrtf (2 ulp)
  // stay near 1e-6 relative; atol covers a sum with the bias that cancels. fp16/bf16: one rounding
  // of the output (2^-11 resp. 2^-8 relative), and the reference's own rounding, on top.
  k.tolerance = {
      {DType::kF32, {1e-5, 1e-5}},
      {DType::kF16, {1e-4, 2e-3}},
      {DType::kBF16, {1e-3, 1.6e-2}},
  };
  k.flops = flops;
  k.bytes = bytes;
  k.check_shape = check_shape;
  k.cuda_geometry = row_geometry_for<cuda_space>;
  // Static shared memory: the block reduction's 33 floats (layernorm.cu), whatever the
  // configuration and dtype (measured: tests/worker/compiler_test.cc).
  k.cuda_static_shared_bytes = 132;
  k.edge_shapes = row_edge_shapes();
  return k;
}

// eps 1e-12: BERT and the Hugging Face ViT (layer_norm_eps).
KernelSpec make_e12_spec() { return with_eps(make_spec(), "layernorm_e12", "1e-5", "1e-12"); }
// eps 1e-6: timm's vision transformers, T5-era encoders.
KernelSpec make_e6_spec() { return with_eps(make_spec(), "layernorm_e6", "1e-5", "1e-6"); }

}  // namespace ak::kernels::layernorm
