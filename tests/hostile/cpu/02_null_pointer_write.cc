// expect-status: CRASH
// expect-stage: verify|sandbox
// Stores through a null pointer on the first call: SIGSEGV kills the sandbox before it replies;
// the supervisor sees the death and reports CRASH.
//
// Stage: the supervisor reports the stage of the sandbox's last progress line (verify.smoke), or
// "sandbox" when there was none (worker/supervisor.h); both are accepted.
//
// The pointer is read from a volatile variable, so the compiler cannot see that it is null and
// replace the store by a trap (that would be SIGILL, still a crash, but not the segfault meant).
#include <cstdint>

namespace {
float* volatile null_target = nullptr;
}  // namespace

extern "C" int ak_softmax_cpu(const void* in, void* out, int64_t rows, int64_t cols, int dtype) {
  if (!in || !out || rows < 1 || cols < 1) return 1;
  if (dtype != 0) return 3;
  float* p = null_target;
  p[0] = static_cast<const float*>(in)[0];
  return 0;
}
