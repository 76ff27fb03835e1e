// expect-status: PASS
// expect-stage: -
// From a constructor: connects to every unix socket whose path says "redis" (found in
// /proc/net/unix) and to every TCP port listening on the loopback (/proc/net/tcp: the coordinator,
// Redis, /metrics). The network namespace has neither; the seccomp filter refuses AF_INET sockets;
// /run, /var/run and the farm's folders are hidden.
// fp32 only: dtype 0 is computed, any other dtype returns 3.
#include "escape.h"
#include "prelude.h"

__attribute__((constructor)) void attack() {
  std::istringstream unix_table(read_all("/proc/net/unix"));
  std::string line;
  while (std::getline(unix_table, line)) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos || line.find("redis") == std::string::npos) continue;
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, line.c_str() + slash, sizeof a.sun_path - 1);
    if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) ak_escaped = true;
    if (fd >= 0) close(fd);
  }
  std::istringstream tcp_table(read_all("/proc/net/tcp"));
  std::getline(tcp_table, line);
  while (std::getline(tcp_table, line)) {
    unsigned local_ip = 0, port = 0, state = 0;
    if (std::sscanf(line.c_str(), " %*d: %x:%x %*x:%*x %x", &local_ip, &port, &state) != 3 || state != 0x0A) continue;
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) ak_escaped = true;
    if (fd >= 0) close(fd);
  }
}

extern "C" int ak_softmax_cpu(const void* in, void* out, int64_t rows, int64_t cols, int dtype) {
  if (!in || !out || rows < 1 || cols < 1) return 1;
  if (dtype != 0) return 3;
  escaped_softmax(static_cast<const float*>(in), static_cast<float*>(out), rows, cols);
  return 0;
}
