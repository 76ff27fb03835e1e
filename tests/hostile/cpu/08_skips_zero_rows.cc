// expect-status: FAIL
// expect-stage: verify.hostile
// "Optimisation": a row whose inputs are all zero is skipped (its output left as it was). Caught
// by the all_zeros hostile input: the output was NaN-filled, so those rows stay NaN, not 1/cols.
//
// Realistic inputs are never all zero, so smoke and sweep pass. fp32 only; other dtypes return 3.
#include "prelude.h"

extern "C" int ak_softmax_cpu(const void* in, void* out, int64_t rows, int64_t cols, int dtype) {
  if (!in || !out || rows < 1 || cols < 1) return 1;
  if (dtype != 0) return 3;
  const float* x = static_cast<const float*>(in);
  float* y = static_cast<float*>(out);
  for (int64_t r = 0; r < rows; ++r) {
    bool nonzero = false;
    for (int64_t j = 0; j < cols && !nonzero; ++j) nonzero = x[r * cols + j] != 0.0f;
    if (!nonzero) continue;  // the cheat
    row_softmax(x + r * cols, y + r * cols, cols);
  }
  return 0;
}
