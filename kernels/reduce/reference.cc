// libtorch side of reduce (sum) and reduce_max: inputs, the fp64 references, the baselines in
// the job's dtype (at::sum_out, at::amax_out), the tolerance scale and the calling conventions of
// kernels/reduce/spec.cc.
#include <ATen/ATen.h>

#include "kernels/reference.h"
#include "kernels/torch_inputs.h"

namespace ak::kernels::reduce {
namespace {

std::vector<at::Tensor> make_inputs(const std::vector<int64_t>& shape, DType dtype, c10::Device device,
                                    uint64_t seed) {
  at::manual_seed(seed);
  auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  // Values of both signs around a per-row offset: sums that partly cancel, and rows whose maxima differ.
  at::Tensor x = at::randn({shape.at(0), shape.at(1)}, opts) + at::randn({shape.at(0), 1}, opts) * 0.5;
  return {x.to(torch_dtype(dtype)).contiguous()};
}

at::Tensor make_output(const std::vector<at::Tensor>& inputs) {
  const at::Tensor& x = inputs.at(0);
  return at::empty({x.size(0)}, x.options());
}

// fp64, then rounded to the job's dtype (so that an fp16 sum beyond 65504 is inf, as the
// candidate's must be), returned as fp32.
at::Tensor sum_reference(const std::vector<at::Tensor>& inputs) {
  const at::Tensor& x = inputs.at(0);
  return at::sum(x.to(at::kDouble), {1}).to(x.scalar_type()).to(at::kFloat);
}
at::Tensor max_reference(const std::vector<at::Tensor>& inputs) {
  const at::Tensor& x = inputs.at(0);
  return at::amax(x.to(at::kDouble), {1}).to(x.scalar_type()).to(at::kFloat);
}

void sum_baseline(const std::vector<at::Tensor>& inputs, at::Tensor& out) { at::sum_out(out, inputs.at(0), {1}); }
void max_baseline(const std::vector<at::Tensor>& inputs, at::Tensor& out) { at::amax_out(out, inputs.at(0), {1}); }

at::Tensor sum_scale(const std::vector<at::Tensor>& inputs, const Tolerance&) {
  return at::sum(inputs.at(0).to(at::kDouble).abs(), {1}).to(at::kFloat);
}

}  // namespace

extern const TorchHarness kSumHarness =
    inputs_out_dims_harness(make_inputs, make_output, sum_reference, sum_baseline, reduction_hostile_inputs, sum_scale);
extern const TorchHarness kMaxHarness =
    inputs_out_dims_harness(make_inputs, make_output, max_reference, max_baseline, reduction_hostile_inputs);

}  // namespace ak::kernels::reduce
