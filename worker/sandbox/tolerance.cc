#include "worker/sandbox/tolerance.h"

namespace ak::sandbox {

double smallest_normal(at::ScalarType dtype) {
  switch (dtype) {
    case at::kHalf:
      return 0x1p-14;
    case at::kBFloat16:
    case at::kFloat:
      return 0x1p-126;
    case at::kDouble:
      return 0x1p-1022;
    default:
      return 0.0;  // integers: no subnormals
  }
}

Comparison compare_with_tolerance(const at::Tensor& out, const at::Tensor& ref, at::ScalarType out_dtype,
                                  kernels::Tolerance tol, const at::Tensor& scale) {
  const double subnormal_step = out_dtype == at::kHalf ? 0x1p-24 : out_dtype == at::kBFloat16 ? 0x1p-133 : 0x1p-149;
  const at::Tensor atol = scale.defined() ? scale.to(at::kFloat).reshape({-1}) * tol.atol
                                          : at::full({}, tol.atol, ref.options().dtype(at::kFloat));
  Comparison c;
  c.diff = (out - ref).abs();
  c.allowed = ref.abs() * tol.rtol + atol + subnormal_step;
  // A reference below the smallest normal may also be taken as 0: then the output must be within
  // the tolerance of 0 (rtol * |0| adds nothing).
  const at::Tensor flushable = ref.abs() < smallest_normal(out_dtype);
  const at::Tensor near_zero = flushable & (out.abs() <= atol + subnormal_step);
  const at::Tensor finite_ref = at::isfinite(ref);
  c.ok = at::where(finite_ref, (c.diff <= c.allowed) | near_zero,  // false for a NaN or inf output
                   at::where(at::isnan(ref), at::isnan(out), out == ref));
  return c;
}

}  // namespace ak::sandbox
