// autokernel-sandbox --backend cpu|cuda --device N [--limit-as-mb N] [--limit-nofile N]
// Speaks worker/sandbox_protocol.h on stdin/stdout; logs to stderr.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "worker/cuda_driver.h"
#include "worker/sandbox/harness.h"

namespace {

int usage(const std::string& why) {
  std::cerr << "autokernel-sandbox: " << why << "\n"
            << "usage: autokernel-sandbox --backend cpu|cuda [--device N] [--limit-as-mb N] [--limit-nofile N]\n"
            << "  --limit-as-mb N   address-space limit (RLIMIT_AS) in MiB, 0 = none\n"
            << "  --limit-nofile N  open-file limit (RLIMIT_NOFILE), 0 = unchanged\n"
            << "Started by the worker; reads one JSON request per line on stdin (worker/sandbox_protocol.h).\n";
  return 2;
}

// The protocol channel: the original stdout. fd 1 itself is pointed at stderr so that whatever a
// candidate or a library prints cannot corrupt the replies.
FILE* open_protocol_channel() {
  int fd = dup(STDOUT_FILENO);
  if (fd < 0) return nullptr;
  std::fflush(stdout);
  dup2(STDERR_FILENO, STDOUT_FILENO);
  return fdopen(fd, "w");
}

void send(FILE* out, const nlohmann::json& j) {
  std::string line = j.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), out);
  std::fflush(out);
}

// Limits the sandbox puts on itself, and so on every candidate it loads: address space, open
// files, no core files (a crashing candidate must not write gigabytes of core), no privilege gain.
bool apply_limits(int64_t as_mb, int64_t nofile) {
  auto set = [](int resource, rlim_t v, const char* what) {
    rlimit r{v, v};
    if (setrlimit(resource, &r) != 0) {
      std::cerr << "autokernel-sandbox: setrlimit(" << what << ", " << v << ") failed: " << std::strerror(errno) << "\n";
      return false;
    }
    return true;
  };
  bool ok = set(RLIMIT_CORE, 0, "RLIMIT_CORE");
  if (as_mb > 0) ok = set(RLIMIT_AS, rlim_t(as_mb) << 20, "RLIMIT_AS") && ok;
  if (nofile > 0) ok = set(RLIMIT_NOFILE, rlim_t(nofile), "RLIMIT_NOFILE") && ok;
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  // A sandbox never outlives its worker: a worker killed mid-job takes its candidate with it.
  const pid_t parent = getppid();
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) return 1;
  std::string backend_arg;
  int device = 0;
  int64_t as_mb = 0, nofile = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      usage("help");
      return 0;
    }
    if ((a == "--backend" || a == "--device" || a == "--limit-as-mb" || a == "--limit-nofile") && i + 1 >= argc)
      return usage(a + " needs a value");
    if (a == "--backend") {
      backend_arg = argv[++i];
    } else if (a == "--device" || a == "--limit-as-mb" || a == "--limit-nofile") {
      int64_t v = 0;
      try {
        size_t used = 0;
        v = std::stoll(argv[++i], &used);
        if (used != std::strlen(argv[i]) || v < 0) throw std::invalid_argument("not a count");
      } catch (const std::exception&) {
        return usage(a + " expects a non-negative number; got '" + argv[i] + "'");
      }
      if (a == "--device") device = int(v);
      if (a == "--limit-as-mb") as_mb = v;
      if (a == "--limit-nofile") nofile = v;
    } else {
      return usage("unknown argument '" + a + "'");
    }
  }
  auto backend = ak::parse_backend(backend_arg);
  if (!backend) return usage("--backend must be cpu or cuda; got '" + backend_arg + "'");

  if (!apply_limits(as_mb, nofile)) return 1;

  FILE* out = open_protocol_channel();
  if (!out) {
    std::perror("autokernel-sandbox: dup(stdout)");
    return 1;
  }

#ifdef AK_NO_CUDA
  if (*backend != ak::Backend::kCpu) {
    ak::SandboxHello no_cuda;
    no_cuda.device = "cuda:" + std::to_string(device);
    no_cuda.error = ak::kNoCudaBackend;
    send(out, no_cuda);
    std::cerr << "autokernel-sandbox: not ready: " << no_cuda.error << "\n";
    return 1;
  }
#endif
  std::unique_ptr<ak::sandbox::Harness> harness = ak::sandbox::make_harness(*backend, device);
  ak::SandboxHello hello = harness->hello();
  send(out, hello);
  if (!hello.ready) {
    std::cerr << "autokernel-sandbox: not ready: " << hello.error << "\n";
    return 1;
  }

  harness->set_progress([out](const std::string& stage) { send(out, ak::SandboxProgress{stage}); });

  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    ak::SandboxReply reply;
    ak::SandboxRequest request;
    bool parsed = false;
    try {
      request = nlohmann::json::parse(line).get<ak::SandboxRequest>();
      parsed = true;
    } catch (const std::exception& e) {
      reply.status = ak::ResultStatus::kFail;
      reply.stage = "sandbox";
      reply.reason = std::string("malformed request (expected a SandboxRequest JSON line): ") + e.what();
    }
    if (parsed) reply = harness->run(request);
    send(out, reply);
    if (reply.status == ak::ResultStatus::kCrash) {
      std::cerr << "autokernel-sandbox: exiting after a device fault: " << reply.reason << "\n";
      return 3;
    }
  }
  return 0;
}
