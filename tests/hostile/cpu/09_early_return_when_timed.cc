// expect-status: REJECTED
// expect-stage: audit
// Honest for its first 40 calls (all of verification); from call 41 on it returns 0 at once and
// writes nothing. Caught by the audit call, whose output (NaN-poisoned before it) is verified.
//
// The call index is a static counter in the library. fp32 only; any other dtype returns 3.
#include <cmath>
#include <cstdint>

namespace {

// max(a, b), NaN when either is NaN.
inline float nan_max(float a, float b) { return (a > b || a != a) ? a : b; }

void row_softmax(const float* x, float* y, int64_t cols) {
  float m = -INFINITY;
  for (int64_t j = 0; j < cols; ++j) m = nan_max(m, x[j]);
  double s = 0.0;
  for (int64_t j = 0; j < cols; ++j) s += std::exp(double(x[j]) - double(m));
  const double inv = 1.0 / s;
  for (int64_t j = 0; j < cols; ++j) y[j] = float(std::exp(double(x[j]) - double(m)) * inv);
}

constexpr uint64_t kHonestCalls = 40;
uint64_t calls = 0;

}  // namespace

extern "C" int ak_softmax_cpu(const void* in, void* out, int64_t rows, int64_t cols, int dtype) {
  if (!in || !out || rows < 1 || cols < 1) return 1;
  if (dtype != 0) return 3;
  if (calls++ >= kHonestCalls) return 0;  // the cheat: success, no work
  const float* x = static_cast<const float*>(in);
  float* y = static_cast<float*>(out);
  for (int64_t r = 0; r < rows; ++r) row_softmax(x + r * cols, y + r * cols, cols);
  return 0;
}
