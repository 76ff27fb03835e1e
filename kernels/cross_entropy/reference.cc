// libtorch side of cross_entropy: logits and targets, the fp64 reference
// (at::cross_entropy_loss, reduction none), the baseline in the job's dtype and the calling
// conventions of kernels/cross_entropy/spec.cc.
#include <ATen/ATen.h>

#include "kernels/reference.h"
#include "kernels/torch_inputs.h"

namespace ak::kernels::cross_entropy {
namespace {

at::Tensor targets(int64_t rows, int64_t cols, c10::Device device, uint64_t seed) {
  at::manual_seed(seed ^ 0x7a6e);
  return at::randint(0, cols, {rows}, at::TensorOptions().dtype(at::kLong).device(device));
}

std::vector<at::Tensor> make_inputs(const std::vector<int64_t>& shape, DType dtype, c10::Device device,
                                    uint64_t seed) {
  at::manual_seed(seed);
  auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  // Logits of a trained model's spread (std 2-4) with a per-row offset.
  at::Tensor x = at::randn({shape.at(0), shape.at(1)}, opts) * (2.0 + 2.0 * at::rand({shape.at(0), 1}, opts)) +
                 at::randn({shape.at(0), 1}, opts);
  return {x.to(torch_dtype(dtype)).contiguous(), targets(shape.at(0), shape.at(1), device, seed)};
}

at::Tensor make_output(const std::vector<at::Tensor>& inputs) {
  const at::Tensor& x = inputs.at(0);
  return at::empty({x.size(0)}, x.options());
}

// fp64, rounded to the job's dtype, returned as fp32.
at::Tensor reference(const std::vector<at::Tensor>& inputs) {
  const at::Tensor& x = inputs.at(0);
  return at::cross_entropy_loss(x.to(at::kDouble), inputs.at(1), {}, at::Reduction::None)
      .to(x.scalar_type())
      .to(at::kFloat);
}

// at::cross_entropy_loss (log_softmax, then nll_loss) has no out= variant: the baseline allocates
// its result as eager code does (from the caching allocator) and `out` is left alone.
void baseline(const std::vector<at::Tensor>& inputs, at::Tensor&) {
  (void)at::cross_entropy_loss(inputs.at(0), inputs.at(1), {}, at::Reduction::None);
}

// The row-wise hostile logits (near the max, +-inf, NaN, ...) with real targets.
std::vector<HostileCase> hostile_inputs(const std::vector<int64_t>& shape, DType dtype, c10::Device device,
                                        uint64_t seed) {
  return with_params(reduction_hostile_inputs(shape, dtype, device, seed),
                     {targets(shape.at(0), shape.at(1), device, seed)});
}

}  // namespace

extern const TorchHarness kHarness =
    inputs_out_dims_harness(make_inputs, make_output, reference, baseline, hostile_inputs);

}  // namespace ak::kernels::cross_entropy
