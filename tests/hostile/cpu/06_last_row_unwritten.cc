// expect-status: FAIL
// expect-stage: verify.smoke
// Correct softmax of every row but the last, which is never written (an off-by-one row bound).
// Caught because the output is filled with NaN before the call: the last row stays NaN.
//
// fp32 only; any other dtype returns 3.
#include "prelude.h"

extern "C" int ak_softmax_cpu(const void* in, void* out, int64_t rows, int64_t cols, int dtype) {
  if (!in || !out || rows < 1 || cols < 1) return 1;
  if (dtype != 0) return 3;
  const float* x = static_cast<const float*>(in);
  float* y = static_cast<float*>(out);
  for (int64_t r = 0; r + 1 < rows; ++r) row_softmax(x + r * cols, y + r * cols, cols);
  return 0;
}
