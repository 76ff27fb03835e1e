// expect-status: CRASH
// expect-stage: verify|sandbox
// Calls abort() on the first call: SIGABRT kills the sandbox before it replies; the supervisor
// sees the death and reports CRASH.
//
// Stage: the supervisor reports the stage of the sandbox's last progress line (verify.smoke), or
// "sandbox" when there was none (worker/supervisor.h); both are accepted.
//
// fp32 only; any other dtype returns 3.
#include <cstdint>
#include <cstdlib>

extern "C" int ak_softmax_cpu(const void* in, void* out, int64_t rows, int64_t cols, int dtype) {
  if (!in || !out || rows < 1 || cols < 1) return 1;
  if (dtype != 0) return 3;
  std::abort();
}
