// Shared libtorch helpers of the kernel types' harnesses (kernels/<type>/reference.cc): the
// torch dtype of a DType, the hostile input sets and the calling convention of row-wise ops.
// Sandbox only (libtorch).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "common/job.h"
#include "kernels/reference.h"

namespace ak::kernels {

at::ScalarType torch_dtype(DType d);

// Largest finite value of the dtype.
double dtype_max(DType d);

// Hostile inputs of shape [rows, cols] for row-wise ops (softmax, reductions, norms), in the
// job's dtype: near_max (the largest finite value, or the one just below, at random), near_zero,
// mixed_scales (row scales 1e-3 .. 1e3), all_zeros, all_equal, neg_inf (about a quarter of each
// row -inf, the element at r % cols kept finite, so no row is fully masked), pos_inf (+inf in
// every seventh row) and nan (NaN in every fifth row). The reference decides what each means
// for the op: for softmax +inf or NaN make the row NaN and -inf gives 0; a sum of near_max
// values overflows to inf.
std::vector<HostileCase> row_hostile_inputs(const std::vector<int64_t>& shape, DType dtype, c10::Device device,
                                            uint64_t seed);

// row_hostile_inputs and masked_nan, for the ops whose result is NaN wherever a row holds a NaN
// (softmax, the reductions, cross_entropy): rows of -inf but for one finite element and, in every
// other row, one NaN. A group reduction that merges a partial holding only NaN (and -inf) with an
// empty one can drop the NaN, since fmax ignores it, and give the row a finite result.
std::vector<HostileCase> reduction_hostile_inputs(const std::vector<int64_t>& shape, DType dtype, c10::Device device,
                                                  uint64_t seed);

// The same sets with near_max bounded: magnitudes near min(dtype max, max_magnitude) (rounded to
// the dtype) with random signs, for ops whose result overflows before the inputs do. A norm
// accumulates x^2 in fp32, which overflows beyond ~1e19 for any dtype whose max is larger (fp32,
// bf16), and all-positive values near the max leave layernorm a row whose deviations are one
// unit in the last place of its mean, so the output would be rounding noise in any precision but
// the reference's; signed values keep the row well conditioned. A rotation grows an element by
// up to sqrt(2) (rotary_embedding: half the max).
std::vector<HostileCase> bounded_hostile_inputs(const std::vector<int64_t>& shape, DType dtype, c10::Device device,
                                             uint64_t seed, double max_magnitude);

// A norm's row scales [rows, 1] with every eighth row (r % 8 == 3) set to sqrt(eps): a row of
// unit spread times that scale has a mean square near eps, where the eps decides the output
// (rmsnorm, layernorm), so a kernel computing with another eps fails verification.
at::Tensor eps_row_scales(const at::Tensor& scales, double eps);

// Appends `params` (weights, biases, tables: the inputs after the first) to every case.
std::vector<HostileCase> with_params(std::vector<HostileCase> cases, const std::vector<at::Tensor>& params);

// The calling convention of most types: every input's pointer in order, the output's, then
// every dimension of inputs[0] (row-wise types: rows, cols; rotary_embedding: tokens, heads,
// dim). cpu entry int (*)(const void* in..., void* out, int64_t dim..., int dtype), for 1 to 4
// inputs and 2 or 3 dimensions; cuda parameters (in..., out, dim...).
int call_cpu_inputs_out_dims(void* entry, const std::vector<at::Tensor>& inputs, at::Tensor& out, DType dtype);
void cuda_params_inputs_out_dims(const std::vector<at::Tensor>& inputs, at::Tensor& out, KernelParams& params);

// A harness of that calling convention (the row-wise types, rotary_embedding).
constexpr TorchHarness inputs_out_dims_harness(decltype(TorchHarness::make_inputs) make_inputs,
                                               decltype(TorchHarness::make_output) make_output,
                                               decltype(TorchHarness::reference) reference,
                                               decltype(TorchHarness::baseline) baseline,
                                               decltype(TorchHarness::hostile_inputs) hostile_inputs,
                                               decltype(TorchHarness::tolerance_scale) tolerance_scale = nullptr) {
  return {make_inputs,    make_output,    reference, baseline, call_cpu_inputs_out_dims, cuda_params_inputs_out_dims,
          hostile_inputs, tolerance_scale};
}

}  // namespace ak::kernels
