// Shared libtorch helpers of the kernel types' harnesses (kernels/torch_inputs.h).
#include "kernels/torch_inputs.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

namespace ak::kernels {

at::ScalarType torch_dtype(DType d) {
  switch (d) {
    case DType::kF32: return at::kFloat;
    case DType::kF16: return at::kHalf;
    case DType::kBF16: return at::kBFloat16;
  }
  return at::kFloat;
}

double dtype_max(DType d) {
  switch (d) {
    case DType::kF32: return 3.4028234663852886e38;
    case DType::kF16: return 65504.0;
    case DType::kBF16: return 3.3895313892515355e38;
  }
  return 0;
}

namespace {

// near_max: magnitudes `top` or the value just below it, in the dtype; random signs if `signed_values`.
at::Tensor near_max(int64_t rows, int64_t cols, DType dtype, c10::Device device, double top_value, bool signed_values) {
  const at::ScalarType st = torch_dtype(dtype);
  auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
  at::Tensor top = at::full({rows, cols}, top_value, f32.dtype(at::kDouble)).to(st);
  at::Tensor below = at::nextafter(top, at::zeros_like(top));
  at::Tensor pick = at::rand({rows, cols}, f32) < 0.5;
  at::Tensor x = at::where(pick, top, below);
  if (signed_values) x = at::where(at::rand({rows, cols}, f32) < 0.5, x, -x);
  return x.contiguous();
}

}  // namespace

std::vector<HostileCase> bounded_hostile_inputs(const std::vector<int64_t>& shape, DType dtype, c10::Device device,
                                             uint64_t seed, double max_magnitude) {
  std::vector<HostileCase> cases = row_hostile_inputs(shape, dtype, device, seed);
  at::manual_seed(seed ^ 0x5eed);
  for (HostileCase& c : cases)
    if (c.name == "near_max")
      c.inputs = {near_max(shape.at(0), shape.at(1), dtype, device, std::min(dtype_max(dtype), max_magnitude), true)};
  return cases;
}

at::Tensor eps_row_scales(const at::Tensor& scales, double eps) {
  const at::Tensor row = at::arange(scales.size(0), scales.options().dtype(at::kLong)).unsqueeze(1);
  return at::where(row % 8 == 3, at::full_like(scales, std::sqrt(eps)), scales);
}

std::vector<HostileCase> with_params(std::vector<HostileCase> cases, const std::vector<at::Tensor>& params) {
  for (HostileCase& c : cases) c.inputs.insert(c.inputs.end(), params.begin(), params.end());
  return cases;
}

std::vector<HostileCase> row_hostile_inputs(const std::vector<int64_t>& shape, DType dtype, c10::Device device,
                                            uint64_t seed) {
  at::manual_seed(seed);
  const int64_t rows = shape.at(0), cols = shape.at(1);
  const at::ScalarType st = torch_dtype(dtype);
  auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
  auto cast = [&](const at::Tensor& x) { return std::vector<at::Tensor>{x.to(st).contiguous()}; };
  at::Tensor noise = at::randn({rows, cols}, f32);
  std::vector<HostileCase> cases;
  // The largest finite value or the one just below it (in the job's dtype).
  cases.push_back({"near_max", {near_max(rows, cols, dtype, device, dtype_max(dtype), false)}});
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

std::vector<HostileCase> reduction_hostile_inputs(const std::vector<int64_t>& shape, DType dtype, c10::Device device,
                                                  uint64_t seed) {
  std::vector<HostileCase> cases = row_hostile_inputs(shape, dtype, device, seed);
  const int64_t rows = shape.at(0), cols = shape.at(1);
  if (cols > 2) {
    auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
    at::manual_seed(seed ^ 0x4a4e);
    at::Tensor r = at::arange(rows, f32.dtype(at::kLong)).reshape({rows, 1});
    at::Tensor c = at::arange(cols, f32.dtype(at::kLong)).reshape({1, cols});
    at::Tensor fin_col = c == r % cols;
    at::Tensor nan_col = (c == (r % cols + 1 + (r * 7) % (cols - 1)) % cols) & (r % 2 == 0);
    at::Tensor x = at::where(fin_col, at::randn({rows, cols}, f32) * 3.0,
                             at::full({}, -std::numeric_limits<double>::infinity(), f32));
    x = at::where(nan_col, at::full({}, std::nan(""), f32), x);
    cases.push_back({"masked_nan", {x.to(torch_dtype(dtype)).contiguous()}});
  }
  return cases;
}

namespace {

// entry(p[0], ..., p[P-1], d[0], ..., d[D-1], dtype) with P pointer and D int64_t parameters.
template <size_t... Pi, size_t... Di>
int call_entry(void* entry, const std::vector<void*>& p, const std::vector<int64_t>& d, int dtype,
               std::index_sequence<Pi...>, std::index_sequence<Di...>) {
  using Fn = int (*)(decltype((void)Pi, static_cast<void*>(nullptr))..., decltype((void)Di, int64_t{})..., int);
  return reinterpret_cast<Fn>(entry)(p[Pi]..., d[Di]..., dtype);
}

template <size_t P>
int call_entry_dims(void* entry, const std::vector<void*>& p, const std::vector<int64_t>& d, int dtype) {
  if (d.size() == 2) return call_entry(entry, p, d, dtype, std::make_index_sequence<P>{}, std::make_index_sequence<2>{});
  if (d.size() == 3) return call_entry(entry, p, d, dtype, std::make_index_sequence<P>{}, std::make_index_sequence<3>{});
  throw std::invalid_argument("cpu calling convention: inputs[0] must have 2 or 3 dimensions");
}

}  // namespace

int call_cpu_inputs_out_dims(void* entry, const std::vector<at::Tensor>& inputs, at::Tensor& out, DType dtype) {
  std::vector<void*> p;
  for (const at::Tensor& t : inputs) p.push_back(const_cast<void*>(t.const_data_ptr()));
  p.push_back(out.mutable_data_ptr());
  const std::vector<int64_t> d = inputs.at(0).sizes().vec();
  const int dt = static_cast<int>(dtype);
  switch (p.size()) {
    case 2: return call_entry_dims<2>(entry, p, d, dt);
    case 3: return call_entry_dims<3>(entry, p, d, dt);
    case 4: return call_entry_dims<4>(entry, p, d, dt);
    case 5: return call_entry_dims<5>(entry, p, d, dt);
    default: throw std::invalid_argument("cpu calling convention: 1 to 4 inputs");
  }
}

void cuda_params_inputs_out_dims(const std::vector<at::Tensor>& inputs, at::Tensor& out, KernelParams& params) {
  for (const at::Tensor& t : inputs) params.add_pointer(t.const_data_ptr());
  params.add_pointer(out.mutable_data_ptr());
  for (int64_t d : inputs.at(0).sizes()) params.add_i64(d);
}

}  // namespace ak::kernels
