// expect-status: PASS
// expect-stage: -
// From a constructor: SIGKILL to every process whose command line says "autokernel" (the worker,
// the coordinator) and to its parent. The pid namespace shows none of them and its parent is the
// namespace's init, which ignores it; the unprivileged user may not signal root's processes.
// fp32 only: dtype 0 is computed, any other dtype returns 3.
#include "escape.h"
#include "prelude.h"

__attribute__((constructor)) void attack() {
  kill(getppid(), SIGKILL);
  for (int pid : pids_running("autokernel"))
    if (kill(pid, SIGKILL) == 0) ak_escaped = true;
}

extern "C" int ak_softmax_cpu(const void* in, void* out, int64_t rows, int64_t cols, int dtype) {
  if (!in || !out || rows < 1 || cols < 1) return 1;
  if (dtype != 0) return 3;
  escaped_softmax(static_cast<const float*>(in), static_cast<float*>(out), rows, cols);
  return 0;
}
