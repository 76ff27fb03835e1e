// libtorch side of layernorm: inputs (x, a non-trivial weight and bias), the fp64 reference
// (at::layer_norm), the baseline in the job's dtype and the calling conventions of
// kernels/layernorm/spec.cc, for each eps the type is built with (layernorm 1e-5, layernorm_e12
// 1e-12, layernorm_e6 1e-6).
#include <ATen/ATen.h>

#include "kernels/reference.h"
#include "kernels/torch_inputs.h"

namespace ak::kernels::layernorm {
namespace {

// Weight around 1 and bias around 0, the same for every input set of a seed.
std::vector<at::Tensor> params(int64_t cols, DType dtype, c10::Device device, uint64_t seed) {
  at::manual_seed(seed ^ 0x1a7e);
  auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  const at::ScalarType st = torch_dtype(dtype);
  at::Tensor w = (1.0 + 0.2 * at::randn({cols}, opts)).to(st).contiguous();
  at::Tensor b = (0.1 * at::randn({cols}, opts)).to(st).contiguous();
  return {w, b};
}

template <double Eps>
std::vector<at::Tensor> make_inputs(const std::vector<int64_t>& shape, DType dtype, c10::Device device, uint64_t seed) {
  at::manual_seed(seed);
  auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  // Rows with their own offset (mean up to ~2) and scale (0.25 to 4), and every eighth row with
  // mean 0 and its variance near eps, where a kernel of another eps is off by a factor of 1.3 or
  // more (an offset there would leave deviations below the dtype's resolution of the mean).
  const at::Tensor scale = at::exp2(at::rand({shape.at(0), 1}, opts) * 4.0 - 2.0);
  const at::Tensor eps_scale = eps_row_scales(scale, Eps);
  // (one draw per statement: the operands of one expression are evaluated in an unspecified order)
  const at::Tensor noise = at::randn({shape.at(0), shape.at(1)}, opts);
  const at::Tensor offset = at::randn({shape.at(0), 1}, opts);
  const at::Tensor x = noise * eps_scale + offset * (eps_scale == scale);
  std::vector<at::Tensor> in = {x.to(torch_dtype(dtype)).contiguous()};
  for (at::Tensor& p : params(shape.at(1), dtype, device, seed)) in.push_back(p);
  return in;
}

at::Tensor make_output(const std::vector<at::Tensor>& inputs) { return at::empty_like(inputs.at(0)); }

// fp64, rounded to the job's dtype, returned as fp32.
template <double Eps>
at::Tensor reference(const std::vector<at::Tensor>& inputs) {
  const at::Tensor& x = inputs.at(0);
  return at::layer_norm(x.to(at::kDouble), {x.size(1)}, inputs.at(1).to(at::kDouble), inputs.at(2).to(at::kDouble), Eps)
      .to(x.scalar_type())
      .to(at::kFloat);
}

// at::layer_norm has no out= kernel (native_layer_norm.out computes, then copies), so the
// baseline allocates its result as eager code does (from the caching allocator) and `out` is
// left alone.
template <double Eps>
void baseline(const std::vector<at::Tensor>& inputs, at::Tensor&) {
  const at::Tensor& x = inputs.at(0);
  (void)at::layer_norm(x, {x.size(1)}, inputs.at(1), inputs.at(2), Eps);
}

std::vector<HostileCase> hostile_inputs(const std::vector<int64_t>& shape, DType dtype, c10::Device device,
                                        uint64_t seed) {
  return with_params(bounded_hostile_inputs(shape, dtype, device, seed, 1e15), params(shape.at(1), dtype, device, seed));
}

}  // namespace

extern const TorchHarness kHarness =
    inputs_out_dims_harness(make_inputs<1e-5>, make_output, reference<1e-5>, baseline<1e-5>, hostile_inputs);
extern const TorchHarness kE12Harness =
    inputs_out_dims_harness(make_inputs<1e-12>, make_output, reference<1e-12>, baseline<1e-12>, hostile_inputs);
extern const TorchHarness kE6Harness =
    inputs_out_dims_harness(make_inputs<1e-6>, make_output, reference<1e-6>, baseline<1e-6>, hostile_inputs);

}  // namespace ak::kernels::layernorm
