// expect-status: FAIL
// expect-stage: verify.hostile
// Softmax without max subtraction, exp(x) / sum(exp(x)) in float: fine on realistic logits, but
// near the dtype max expf overflows to inf and inf / inf is NaN. Caught by the near_max input.
//
// The sum is in double, so realistic rows (|x| < ~60) are as accurate as the honest candidate;
// only the float exp overflows (at x > 88.7). fp32 only; any other dtype returns 3.
#include <cmath>
#include <cstdint>

extern "C" int ak_softmax_cpu(const void* in, void* out, int64_t rows, int64_t cols, int dtype) {
  if (!in || !out || rows < 1 || cols < 1) return 1;
  if (dtype != 0) return 3;
  const float* x = static_cast<const float*>(in);
  float* y = static_cast<float*>(out);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    double s = 0.0;
    for (int64_t j = 0; j < cols; ++j) s += std::exp(xr[j]);  // the bug: float exp, no max
    for (int64_t j = 0; j < cols; ++j) yr[j] = float(std::exp(xr[j]) / s);
  }
  return 0;
}
