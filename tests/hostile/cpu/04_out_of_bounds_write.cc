// expect-status: REJECTED
// expect-stage: verify.smoke
// Correct softmax, plus one store one element past the end of the output (out[rows * cols]).
// Caught by the guard band after the output buffer, checked after every call.
//
// fp32 only; any other dtype returns 3.
#include "prelude.h"

extern "C" int ak_softmax_cpu(const void* in, void* out, int64_t rows, int64_t cols, int dtype) {
  if (!in || !out || rows < 1 || cols < 1) return 1;
  if (dtype != 0) return 3;
  const float* x = static_cast<const float*>(in);
  float* y = static_cast<float*>(out);
  for (int64_t r = 0; r < rows; ++r) row_softmax(x + r * cols, y + r * cols, cols);
  y[rows * cols] = 0.5f;  // the overrun: a plausible value, so only the guard band can tell
  return 0;
}
