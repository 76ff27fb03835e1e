// libtorch side of softmax: inputs, the reference (at::_softmax in fp64), the baseline in the job's
// dtype, and the calling conventions of kernels/softmax/spec.cc.
#include <ATen/ATen.h>

#include "kernels/reference.h"
#include "kernels/torch_inputs.h"

namespace ak::kernels::softmax {
namespace {

std::vector<at::Tensor> make_inputs(const std::vector<int64_t>& shape, DType dtype, c10::Device device,
                                    uint64_t seed) {
  at::manual_seed(seed);
  auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  // Logits of spread ~3 within a row plus a per-row offset of spread ~8: rows whose exp would
  // overflow fp16 without max subtraction, and a realistic tail of tiny probabilities.
  at::Tensor x = at::randn({shape.at(0), shape.at(1)}, opts) * 3.0 + at::randn({shape.at(0), 1}, opts) * 8.0;
  return {x.to(torch_dtype(dtype)).contiguous()};
}

at::Tensor make_output(const std::vector<at::Tensor>& inputs) { return at::empty_like(inputs.at(0)); }

// Computed in fp64 and rounded to fp32: the reference's own error (~1e-6 relative in fp32 for
// rows of 50k) must stay well below the fp32 tolerance it is compared with.
at::Tensor reference(const std::vector<at::Tensor>& inputs) {
  return at::_softmax(inputs.at(0).to(at::kDouble), /*dim=*/1, /*half_to_float=*/false).to(at::kFloat);
}

void baseline(const std::vector<at::Tensor>& inputs, at::Tensor& out) {
  at::_softmax_out(out, inputs.at(0), /*dim=*/1, /*half_to_float=*/false);
}

}  // namespace

extern const TorchHarness kHarness =
    inputs_out_dims_harness(make_inputs, make_output, reference, baseline, reduction_hostile_inputs);

}  // namespace ak::kernels::softmax
