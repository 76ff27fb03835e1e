// The cross_entropy kernel type: loss[r] = logsumexp(x[r, :]) - x[r, t[r]] for logits x
// [rows, vocab] and int64 targets t [rows] (PyTorch's cross_entropy with reduction="none"); the
// loss has the logits' dtype.
//
// cpu entry:  extern "C" int ak_cross_entropy_cpu(const void* logits, const int64_t* targets,
//                                                 void* loss, int64_t rows, int64_t cols, int dtype)
// cuda entry: extern "C" __global__ void ak_cross_entropy(const void* logits, const void* targets,
//                                                         void* loss, long long rows, long long cols)
// See cross_entropy_cpu.cc and cross_entropy.cu for the tunables.
#include <string>

#include "kernels/cross_entropy/sources.h"
#include "kernels/registry.h"

namespace ak::kernels::cross_entropy {
namespace {

double flops(const std::vector<int64_t>& shape) {
  // per logit: compare, subtract, exp, add
  return 4.0 * double(shape.at(0)) * double(shape.at(1));
}

double bytes(const std::vector<int64_t>& shape, DType dtype) {
  // the logits once, an int64 target and a loss per row
  return double(shape.at(0)) * (double(shape.at(1)) * dtype_bytes(dtype) + 8.0 + dtype_bytes(dtype));
}

std::string check_shape(const std::vector<int64_t>& shape) { return check_rows_cols("cross_entropy", shape); }

std::vector<Tunable> cuda_space() {
  std::vector<Tunable> space = row_cuda_space(512, {1, 2, 4, 8}, 8);
  space.push_back({"AK_CHUNK", {1, 2, 4, 8}, 1});
  return space;
}

std::string triton_signature(DType d) {
  const std::string t = dtype_name(d);
  return "logits_ptr:*" + t + ",targets_ptr:*i64,loss_ptr:*" + t + ",rows:i64,cols:i64";
}

}  // namespace

KernelSpec make_spec() {
  KernelSpec k;
  k.name = "cross_entropy";
  k.dtypes = {DType::kF32, DType::kF16, DType::kBF16};
  k.backends[Backend::kCpu] = BackendSource{
      std::string(kCpuSource),
      "ak_cross_entropy_cpu",
      row_cpu_space(),
      {{64, 1024}, {256, 4096}, {32, 32000}},
  };
  // Vocabularies of LLaMA-2 (32000), GPT-2 (50257, rows not 16-byte aligned) and LLaMA-3 (128256).
  k.backends[Backend::kCuda] = BackendSource{
      std::string(kCudaSource),
      "ak_cross_entropy",
      cuda_space(),
      {{4096, 32000}, {4096, 50257}, {2048, 128256}, {1000, 1023}},
  };
  k.backends[Backend::kTriton] = BackendSource{
      std::string(kTritonSource),
      "cross_entropy_kernel",
      row_triton_space({1024, 2048, 4096}, 2048, 8),
      {{4096, 32000}, {4096, 50257}, {2048, 128256}, {1000, 1023}},
  };
  k.triton_grid = one_program_per_row;
  k.triton_signature = triton_signature;
  k.triton_divisible = {"logits_ptr", "cols"};
  // Losses are a few units (log(vocab) ~ 10 for random logits); the reference is fp64. fp32: the
  // fp32 sum of exponentials and its log stay near 1e-6 relative. fp16/bf16: one rounding of the
  // loss to the dtype (2^-11 resp. 2^-8 relative), and the reference's own, on top.
  k.tolerance = {
      {DType::kF32, {1e-5, 1e-5}},
      {DType::kF16, {1e-4, 2e-3}},
      {DType::kBF16, {1e-3, 1.6e-2}},
  };
  k.flops = flops;
  k.bytes = bytes;
  k.check_shape = check_shape;
  k.cuda_geometry = row_geometry_for<cuda_space>;
  // Static shared memory: the block reduction's 32 (max, sum) pairs of floats (cross_entropy.cu),
  // whatever the configuration and dtype (measured: tests/worker/compiler_test.cc).
  k.cuda_static_shared_bytes = 256;
  k.edge_shapes = row_edge_shapes();
  return k;
}

}  // namespace ak::kernels::cross_entropy
