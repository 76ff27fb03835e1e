// expect-status: PASS
// expect-stage: -
// From a constructor: finds the worker's compile cache (its --cache-dir, through /proc) and plants
// a file in it, then tries to overwrite its own staged artefact. The cache is hidden (and not the
// unprivileged user's), the fresh /proc has no worker, and the artefact is staged read-only.
#include <dlfcn.h>
// fp32 only: dtype 0 is computed, any other dtype returns 3.
#include "escape.h"
#include "prelude.h"

__attribute__((constructor)) void attack() {
  const std::string cache = flag_of("autokernel", "--cache-dir");
  if (!cache.empty()) {
    const int fd = open((cache + "/cpu-planted-by-a-candidate.so").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ak_escaped = true;
      close(fd);
    }
  }
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&attack), &info) && info.dli_fname) {
    // The harness loads a copy from its own folder; the staged original sits in <tmp>/in/<n>/.
    const int fd = open(info.dli_fname, O_WRONLY | O_APPEND);
    if (fd >= 0) close(fd);  // its own copy is its own business
  }
}

extern "C" int ak_softmax_cpu(const void* in, void* out, int64_t rows, int64_t cols, int dtype) {
  if (!in || !out || rows < 1 || cols < 1) return 1;
  if (dtype != 0) return 3;
  escaped_softmax(static_cast<const float*>(in), static_cast<float*>(out), rows, cols);
  return 0;
}
