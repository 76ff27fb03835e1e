// expect-status: REJECTED
// expect-stage: verify.smoke
// Correct output, but after finishing a row it overwrites that row's first input element.
// Caught by comparing the inputs with their copies after the call.
//
// fp32 only; any other dtype returns 3.
#include "prelude.h"

extern "C" int ak_softmax_cpu(const void* in, void* out, int64_t rows, int64_t cols, int dtype) {
  if (!in || !out || rows < 1 || cols < 1) return 1;
  if (dtype != 0) return 3;
  float* x = const_cast<float*>(static_cast<const float*>(in));  // the const is cast away on purpose
  float* y = static_cast<float*>(out);
  for (int64_t r = 0; r < rows; ++r) {
    row_softmax(x + r * cols, y + r * cols, cols);
    x[r * cols] = 12345.0f;  // after the row's last read; changes the bits of any real input
  }
  return 0;
}
