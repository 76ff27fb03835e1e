// libtorch side of matmul: inputs, the fp64 reference (at::mm), the cuBLAS baseline in the job's
// dtype (at::mm_out; fp32 without TF32, PyTorch's default), the tolerance scale |A| @ |B| and the
// calling conventions of kernels/matmul/spec.cc.
#include <ATen/ATen.h>

#include "kernels/reference.h"
#include "kernels/torch_inputs.h"

namespace ak::kernels::matmul {
namespace {

at::Tensor operand(int64_t rows, int64_t cols, DType dtype, c10::Device device) {
  auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  return at::randn({rows, cols}, opts).to(torch_dtype(dtype)).contiguous();
}

std::vector<at::Tensor> make_inputs(const std::vector<int64_t>& shape, DType dtype, c10::Device device,
                                    uint64_t seed) {
  at::manual_seed(seed);
  const int64_t m = shape.at(0), n = shape.at(1), k = shape.at(2);
  return {operand(m, k, dtype, device), operand(k, n, dtype, device)};
}

at::Tensor make_output(const std::vector<at::Tensor>& inputs) {
  return at::empty({inputs.at(0).size(0), inputs.at(1).size(1)}, inputs.at(0).options());
}

// fp64, rounded to the job's dtype, returned as fp32.
at::Tensor reference(const std::vector<at::Tensor>& inputs) {
  const at::Tensor& a = inputs.at(0);
  return at::mm(a.to(at::kDouble), inputs.at(1).to(at::kDouble)).to(a.scalar_type()).to(at::kFloat);
}

void baseline(const std::vector<at::Tensor>& inputs, at::Tensor& out) { at::mm_out(out, inputs.at(0), inputs.at(1)); }

at::Tensor tolerance_scale(const std::vector<at::Tensor>& inputs, const Tolerance&) {
  return at::mm(inputs.at(0).to(at::kDouble).abs(), inputs.at(1).to(at::kDouble).abs()).to(at::kFloat);
}

using CpuEntry = int (*)(const void*, const void*, void*, int64_t, int64_t, int64_t, int);

int call_cpu(void* entry, const std::vector<at::Tensor>& inputs, at::Tensor& out, DType dtype) {
  const at::Tensor& a = inputs.at(0);
  const at::Tensor& b = inputs.at(1);
  return reinterpret_cast<CpuEntry>(entry)(a.const_data_ptr(), b.const_data_ptr(), out.mutable_data_ptr(), a.size(0),
                                           b.size(1), a.size(1), static_cast<int>(dtype));
}

void cuda_params(const std::vector<at::Tensor>& inputs, at::Tensor& out, KernelParams& params) {
  const at::Tensor& a = inputs.at(0);
  const at::Tensor& b = inputs.at(1);
  params.add_pointer(a.const_data_ptr());
  params.add_pointer(b.const_data_ptr());
  params.add_pointer(out.mutable_data_ptr());
  params.add_i64(a.size(0));
  params.add_i64(b.size(1));
  params.add_i64(a.size(1));
}

// The row-wise hostile sets as A, with a real B. Every finite set is scaled down, where needed,
// so that no output can overflow (|a| <= max / (4 K max|b|)): past that, whether an output near
// the threshold rounds to inf or to the largest finite value depends on the order of the K
// additions, for the reference as for any candidate (seen on the H200: fp16 mixed_scales at
// 8192^3 gave 65504 where the fp64 reference rounds to inf). near_max sits at that bound.
std::vector<HostileCase> hostile_inputs(const std::vector<int64_t>& shape, DType dtype, c10::Device device,
                                        uint64_t seed) {
  at::manual_seed(seed ^ 0xb0b);
  const int64_t m = shape.at(0), n = shape.at(1), k = shape.at(2);
  at::Tensor b = operand(k, n, dtype, device);
  const double bmax = b.abs().max().item<double>();
  const double bound = dtype_max(dtype) / (4.0 * double(k) * std::max(bmax, 1.0));
  std::vector<HostileCase> cases = bounded_hostile_inputs({m, k}, dtype, device, seed, bound);
  for (HostileCase& c : cases) {
    at::Tensor& a = c.inputs.at(0);
    if (!at::isfinite(a).all().item<bool>()) continue;
    const double amax = a.abs().max().item<double>();
    if (amax > bound) a = (a.to(at::kDouble) * (bound / amax)).to(a.scalar_type()).contiguous();
  }
  return with_params(std::move(cases), {b});
}

}  // namespace

extern const TorchHarness kHarness = {make_inputs, make_output, reference, baseline,
                                      call_cpu,    cuda_params, hostile_inputs, tolerance_scale};

}  // namespace ak::kernels::matmul
