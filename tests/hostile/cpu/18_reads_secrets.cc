// expect-status: PASS
// expect-stage: -
// From a constructor: reads /etc/shadow and the environment of every "autokernel" process through
// /proc/<pid>/environ. /etc/shadow is hidden behind /dev/null (and unreadable for nobody); the
// fresh /proc has no such process.
// fp32 only: dtype 0 is computed, any other dtype returns 3.
#include "escape.h"
#include "prelude.h"

__attribute__((constructor)) void attack() {
  if (read_all("/etc/shadow").find("root:") != std::string::npos) ak_escaped = true;
  for (int pid : pids_running("autokernel"))
    if (!read_all("/proc/" + std::to_string(pid) + "/environ").empty()) ak_escaped = true;
}

extern "C" int ak_softmax_cpu(const void* in, void* out, int64_t rows, int64_t cols, int dtype) {
  if (!in || !out || rows < 1 || cols < 1) return 1;
  if (dtype != 0) return 3;
  escaped_softmax(static_cast<const float*>(in), static_cast<float*>(out), rows, cols);
  return 0;
}
