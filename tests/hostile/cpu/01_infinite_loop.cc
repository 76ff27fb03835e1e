// expect-status: TIMEOUT
// expect-stage: verify|sandbox
// Never returns: spins on a volatile flag that nothing ever sets. Caught by the supervisor's
// wall-clock limit on the sandbox, which kills the process.
//
// Stage: the supervisor reports the stage of the sandbox's last progress line (verify.smoke), or
// "sandbox" when there was none (worker/supervisor.h); both are accepted.
//
// The flag is volatile, so every iteration is a load the compiler must keep: it cannot assume the
// loop terminates (C++ [intro.progress]) and delete it. fp32 only; any other dtype returns 3.
#include <cstdint>

namespace {
volatile int release = 0;  // never written: the loop waits for it forever
}  // namespace

extern "C" int ak_softmax_cpu(const void* in, void* out, int64_t rows, int64_t cols, int dtype) {
  if (!in || !out || rows < 1 || cols < 1) return 1;
  if (dtype != 0) return 3;
  while (release == 0) {
  }
  return 0;
}
