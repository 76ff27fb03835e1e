// expect-status: FAIL
// expect-stage: verify.determinism
// The row sum runs over 8 float lanes starting at an offset that rotates from call to call (a
// static counter): within tolerance, but bitwise different between runs. Caught by determinism.
//
// Why it is nondeterministic: float addition is not associative. Element j goes to lane
// (j - offset) mod 8 and each lane sums in order from the offset, so a new offset regroups and
// reorders the additions and the rounding of the sum changes, which shifts every output of the
// row by an ulp or so. The offset is (call index) mod cols; max, exp and divide are deterministic.
// Accuracy: 8 lanes of cols/8 terms each err by ~2^-24 * sqrt(cols/8) / 3 relative, about 1e-6
// at cols = 4096, well inside rtol 2e-5. exp in double, rounded to float before it is summed.
// Non-finite inputs as the honest candidate: NaN-propagating max, a NaN in the sum makes the row
// NaN. fp32 only; any other dtype returns 3.
#include "prelude.h"

namespace {

constexpr int kLanes = 8;
uint64_t calls = 0;

void row_softmax(const float* x, float* y, int64_t cols, int64_t offset) {
  float m = -INFINITY;
  for (int64_t j = 0; j < cols; ++j) m = nan_max(m, x[j]);
  float lane[kLanes] = {};
  for (int64_t k = 0; k < cols; ++k) {
    int64_t j = offset + k;
    if (j >= cols) j -= cols;
    lane[k % kLanes] += float(std::exp(double(x[j]) - double(m)));
  }
  float s = 0.0f;
  for (int l = 0; l < kLanes; ++l) s += lane[l];
  const double inv = 1.0 / double(s);
  for (int64_t j = 0; j < cols; ++j) y[j] = float(std::exp(double(x[j]) - double(m)) * inv);
}

}  // namespace

extern "C" int ak_softmax_cpu(const void* in, void* out, int64_t rows, int64_t cols, int dtype) {
  if (!in || !out || rows < 1 || cols < 1) return 1;
  if (dtype != 0) return 3;
  const int64_t offset = int64_t(calls++ % uint64_t(cols));
  const float* x = static_cast<const float*>(in);
  float* y = static_cast<float*>(out);
  for (int64_t r = 0; r < rows; ++r) row_softmax(x + r * cols, y + r * cols, cols, offset);
  return 0;
}
