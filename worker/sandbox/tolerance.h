// The element-wise rule every verification stage of the sandbox applies to a candidate's output
// (worker/sandbox/harness.cc turns a failure into the reply's reason). libtorch: compiled into
// the sandbox and its test only.
//
// Thread-compatible: pure functions of their arguments.
#pragma once

#include <ATen/ATen.h>

#include "kernels/registry.h"

namespace ak::sandbox {

// The smallest positive normal number of `dtype` (fp16 2^-14, bf16 and fp32 2^-126).
double smallest_normal(at::ScalarType dtype);

// The outcome of comparing an output with its reference, both flattened to fp32.
struct Comparison {
  at::Tensor ok;       // bool, per element: the output is acceptable
  at::Tensor diff;     // |out - ref| per element
  at::Tensor allowed;  // the tolerance per element, atol (times scale) + rtol * |ref| + one subnormal step
};

// Where the reference is finite: |out - ref| <= atol + rtol * |ref|, atol multiplied by `scale`
// where it is defined, plus one subnormal step of `out_dtype` (a reference and a candidate may
// round a value near a subnormal boundary apart, and relative tolerances do not reach there).
// A finite reference below `out_dtype`'s smallest normal also compares equal to zero, so that an
// output within the tolerance of 0 passes there too: flushing subnormals to zero (FTZ, fast-math,
// approximate exponentials) is legal in a candidate. Where the reference is NaN the output must be
// NaN, and where it is +-inf the same infinity.
//
// out and ref: fp32 tensors of equal numel, flattened; out_dtype: the dtype the candidate wrote;
// scale: undefined, or fp32 with the numel of ref.
Comparison compare_with_tolerance(const at::Tensor& out, const at::Tensor& ref, at::ScalarType out_dtype,
                                  kernels::Tolerance tol, const at::Tensor& scale = at::Tensor());

}  // namespace ak::sandbox
