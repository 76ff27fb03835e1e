// expect-status: FAIL
// expect-stage: verify.edge
// Correct for rows of 256 columns or more; a "narrow-row fast path" for cols < 256 copies the
// input through unnormalised. Caught by the edge shapes 1x1, 1x127 and 127x1 (all else is wide).
//
// fp32 only; any other dtype returns 3.
#include "prelude.h"

extern "C" int ak_softmax_cpu(const void* in, void* out, int64_t rows, int64_t cols, int dtype) {
  if (!in || !out || rows < 1 || cols < 1) return 1;
  if (dtype != 0) return 3;
  const float* x = static_cast<const float*>(in);
  float* y = static_cast<float*>(out);
  for (int64_t r = 0; r < rows; ++r) {
    if (cols < 256) {
      for (int64_t j = 0; j < cols; ++j) y[r * cols + j] = x[r * cols + j];  // the bug
    } else {
      row_softmax(x + r * cols, y + r * cols, cols);
    }
  }
  return 0;
}
