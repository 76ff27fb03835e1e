// expect-status: PASS
// expect-stage: -
// From a constructor: a daemon (double fork, setsid, named ak-hostile-dmn) that sleeps forever.
// The supervisor finds a process besides the sandbox after the job and kills the whole tree (the
// pid namespace, the cgroup); hostile_test.cc checks that no ak-hostile-dmn is left.
#include <sys/prctl.h>
// fp32 only: dtype 0 is computed, any other dtype returns 3.
#include "escape.h"
#include "prelude.h"

__attribute__((constructor)) void attack() {
  const pid_t child = fork();
  if (child != 0) return;
  setsid();
  if (fork() != 0) _exit(0);
  prctl(PR_SET_NAME, "ak-hostile-dmn");
  for (int fd = 0; fd < 1024; ++fd) close(fd);
  for (;;) pause();
}

extern "C" int ak_softmax_cpu(const void* in, void* out, int64_t rows, int64_t cols, int dtype) {
  if (!in || !out || rows < 1 || cols < 1) return 1;
  if (dtype != 0) return 3;
  escaped_softmax(static_cast<const float*>(in), static_cast<float*>(out), rows, cols);
  return 0;
}
