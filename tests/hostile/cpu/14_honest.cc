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
#include "prelude.h"

extern "C" int ak_softmax_cpu(const void* in, void* out, int64_t rows, int64_t cols, int dtype) {
  if (!in || !out || rows < 1 || cols < 1) return 1;
  if (dtype != 0) return 3;
  const float* x = static_cast<const float*>(in);
  float* y = static_cast<float*>(out);
  for (int64_t r = 0; r < rows; ++r) row_softmax(x + r * cols, y + r * cols, cols);
  return 0;
}
