// What the escaping candidates (16 to 21) share: they attack the worker and the farm from a
// constructor, which runs when the sandbox loads them, before any verification, and then compute a
// correct softmax. An attack that worked sets ak_escaped, and the softmax then writes NaN, so the
// job FAILs: the expected verdict PASS says every attack was refused or contained.
//
// Not a candidate: hostile_test.cc inlines it where a candidate has the line `#include "escape.h"`,
// before or after `#include "prelude.h"` (clang-format sorts it first), whose row_softmax it
// declares here and uses.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

// Defined in prelude.h (the same unnamed namespace of this translation unit).
void row_softmax(const float* x, float* y, int64_t cols);

bool ak_escaped = false;

[[maybe_unused]] std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The pids this process can see whose command line holds `needle` (arguments joined by spaces).
[[maybe_unused]] std::vector<int> pids_running(const std::string& needle) {
  std::vector<int> out;
  DIR* d = opendir("/proc");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    const int pid = std::atoi(e->d_name);
    if (pid <= 0 || pid == getpid()) continue;
    std::string cmd = read_all("/proc/" + std::string(e->d_name) + "/cmdline");
    for (char& c : cmd)
      if (c == '\0') c = ' ';
    if (cmd.find(needle) != std::string::npos) out.push_back(pid);
  }
  closedir(d);
  return out;
}

// The value after `flag` on the command line of a process whose command line holds `needle`.
[[maybe_unused]] std::string flag_of(const std::string& needle, const std::string& flag) {
  for (int pid : pids_running(needle)) {
    std::string cmd = read_all("/proc/" + std::to_string(pid) + "/cmdline");
    std::vector<std::string> args;
    std::string cur;
    for (char c : cmd) {
      if (c == '\0') {
        args.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
    for (size_t i = 0; i + 1 < args.size(); ++i)
      if (args[i] == flag) {
        std::string v = args[i + 1];
        // A relative folder is the process's: reached through its /proc/<pid>/cwd.
        if (!v.empty() && v[0] != '/') v = "/proc/" + std::to_string(pid) + "/cwd/" + v;
        return v;
      }
  }
  return "";
}

[[maybe_unused]] void escaped_softmax(const float* x, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) row_softmax(x + r * cols, y + r * cols, cols);
  if (ak_escaped) y[0] = NAN;
}

}  // namespace
