// expect-status: REJECTED
// expect-stage: audit
// Honest for its first 40 calls (all of verification); from call 41 on it returns 0 at once and
// writes nothing. Caught by the audit call, whose output (NaN-poisoned before it) is verified.
//
// The call index is a static counter in the library. fp32 only; any other dtype returns 3.
#include "prelude.h"

namespace {

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
