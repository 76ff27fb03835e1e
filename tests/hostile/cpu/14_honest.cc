// expect-status: PASS
// expect-stage: -
// Clean three-sweep softmax (max, sum of exp(x - max) in double, write): the suite's control;
// every defence must let it through, and a harness that rejects it has a false positive.
//
// fp32 only: dtype 0 is computed, any other dtype returns 3. Non-finite inputs follow PyTorch:
// the max propagates NaN (std::fmax would drop it), so a row with NaN or +inf has every
// exp(x - max) NaN (inf - inf is NaN) and a NaN sum: the whole row is NaN. A -inf element gives
// exp(-inf) = 0 while the row has a finite max. exp and the sum in double, so the only rounding
// that matters is the final one to float.
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

}  // namespace

extern "C" int ak_softmax_cpu(const void* in, void* out, int64_t rows, int64_t cols, int dtype) {
  if (!in || !out || rows < 1 || cols < 1) return 1;
  if (dtype != 0) return 3;
  const float* x = static_cast<const float*>(in);
  float* y = static_cast<float*>(out);
  for (int64_t r = 0; r < rows; ++r) row_softmax(x + r * cols, y + r * cols, cols);
  return 0;
}
