// libtorch side of softmax: inputs, the reference (at::_softmax in fp64), the baseline in the job's
// dtype, and the calling conventions of kernels/softmax/spec.cc.
#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "kernels/reference.h"

namespace ak::kernels::softmax {
namespace {

at::ScalarType scalar_type(DType d) {
  switch (d) {
    case DType::kF32: return at::kFloat;
    case DType::kF16: return at::kHalf;
    case DType::kBF16: return at::kBFloat16;
  }
  return at::kFloat;
}

std::vector<at::Tensor> make_inputs(const std::vector<int64_t>& shape, DType dtype, c10::Device device,
                                    uint64_t seed) {
  at::manual_seed(seed);
  auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  // Logits of spread ~3 within a row plus a per-row offset of spread ~8: rows whose exp would
  // overflow fp16 without max subtraction, and a realistic tail of tiny probabilities.
  at::Tensor x = at::randn({shape.at(0), shape.at(1)}, opts) * 3.0 + at::randn({shape.at(0), 1}, opts) * 8.0;
  return {x.to(scalar_type(dtype)).contiguous()};
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

using CpuEntry = int (*)(const void*, void*, int64_t, int64_t, int);

int call_cpu(void* entry, const std::vector<at::Tensor>& inputs, at::Tensor& out, DType dtype) {
  const at::Tensor& x = inputs.at(0);
  return reinterpret_cast<CpuEntry>(entry)(x.const_data_ptr(), out.mutable_data_ptr(), x.size(0), x.size(1),
                                           static_cast<int>(dtype));
}

void cuda_params(const std::vector<at::Tensor>& inputs, at::Tensor& out, KernelParams& params) {
  const at::Tensor& x = inputs.at(0);
  params.add_pointer(x.const_data_ptr());
  params.add_pointer(out.mutable_data_ptr());
  params.add_i64(x.size(0));
  params.add_i64(x.size(1));
}

double dtype_max(DType d) {
  switch (d) {
    case DType::kF32: return 3.4028234663852886e38;
    case DType::kF16: return 65504.0;
    case DType::kBF16: return 3.3895313892515355e38;
  }
  return 0;
}

// Softmax is defined for every input: +inf or NaN anywhere in a row makes the whole row NaN,
// -inf gives 0 as long as the row has a finite value (a fully masked row is 0/0 = NaN and is
// left out: kernels legitimately differ there). The near-max rows differ by a few units in the
// last place of the maximum, so exp without max subtraction overflows.
std::vector<HostileCase> hostile_inputs(const std::vector<int64_t>& shape, DType dtype, c10::Device device,
                                        uint64_t seed) {
  at::manual_seed(seed);
  const int64_t rows = shape.at(0), cols = shape.at(1);
  const at::ScalarType st = scalar_type(dtype);
  auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
  auto cast = [&](const at::Tensor& x) { return std::vector<at::Tensor>{x.to(st).contiguous()}; };
  at::Tensor noise = at::randn({rows, cols}, f32);
  std::vector<HostileCase> cases;
  {
    // The largest finite value, minus a few of its units in the last place (in the job's dtype).
    at::Tensor top = at::full({rows, cols}, dtype_max(dtype), f32.dtype(at::kDouble)).to(st);
    at::Tensor below = at::nextafter(top, at::zeros_like(top));
    at::Tensor pick = at::rand({rows, cols}, f32) < 0.5;
    cases.push_back({"near_max", {at::where(pick.to(device), top, below).contiguous()}});
  }
  cases.push_back({"near_zero", cast(noise * 1e-4)});
  {
    at::Tensor scale = at::pow(10.0, at::linspace(-3.0, 3.0, rows, f32)).reshape({rows, 1});
    cases.push_back({"mixed_scales", cast(noise * scale)});
  }
  cases.push_back({"all_zeros", cast(at::zeros({rows, cols}, f32))});
  cases.push_back({"all_equal", cast(at::full({rows, cols}, 7.25, f32))});
  const double inf = std::numeric_limits<double>::infinity();
  if (cols > 1) {
    // About a quarter of every row masked with -inf; the element at r % cols stays finite.
    at::Tensor masked = at::rand({rows, cols}, f32) < 0.25;
    at::Tensor keep = at::arange(cols, f32.dtype(at::kLong)).reshape({1, cols}) ==
                      (at::arange(rows, f32.dtype(at::kLong)) % cols).reshape({rows, 1});
    cases.push_back({"neg_inf", cast(at::where(masked & ~keep, at::full({}, -inf, f32), noise * 3.0))});
  }
  {
    // +inf in every seventh row (from row 3, or row 0 of a short tensor), NaN in every fifth.
    at::Tensor r = at::arange(rows, f32.dtype(at::kLong)).reshape({rows, 1});
    at::Tensor c = at::arange(cols, f32.dtype(at::kLong)).reshape({1, cols});
    at::Tensor at_col = c == (r * 13) % cols;
    at::Tensor inf_rows = rows > 3 ? (r % 7 == 3) : (r == 0);
    cases.push_back({"pos_inf", cast(at::where(inf_rows & at_col, at::full({}, inf, f32), noise * 3.0))});
    at::Tensor nan_rows = rows > 2 ? (r % 5 == 2) : (r == 0);
    cases.push_back({"nan", cast(at::where(nan_rows & at_col, at::full({}, std::nan(""), f32), noise * 3.0))});
  }
  return cases;
}

}  // namespace

extern const TorchHarness kHarness = {make_inputs, make_output, reference, baseline, call_cpu, cuda_params,
                                      hostile_inputs};

}  // namespace ak::kernels::softmax
