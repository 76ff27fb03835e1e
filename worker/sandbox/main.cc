// autokernel-sandbox --backend cpu|cuda --device N
// Speaks worker/sandbox_protocol.h on stdin/stdout; logs to stderr.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "worker/sandbox/harness.h"

namespace {

int usage(const std::string& why) {
  std::cerr << "autokernel-sandbox: " << why << "\n"
            << "usage: autokernel-sandbox --backend cpu|cuda [--device N]\n"
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

}  // namespace

int main(int argc, char** argv) {
  // A sandbox never outlives its worker: a worker killed mid-job takes its candidate with it.
  const pid_t parent = getppid();
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) return 1;
  std::string backend_arg;
  int device = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      usage("help");
      return 0;
    }
    if ((a == "--backend" || a == "--device") && i + 1 >= argc) return usage(a + " needs a value");
    if (a == "--backend") {
      backend_arg = argv[++i];
    } else if (a == "--device") {
      try {
        device = std::stoi(argv[++i]);
      } catch (const std::exception&) {
        return usage(std::string("--device expects a number; got '") + argv[i] + "'");
      }
    } else {
      return usage("unknown argument '" + a + "'");
    }
  }
  auto backend = ak::parse_backend(backend_arg);
  if (!backend) return usage("--backend must be cpu or cuda; got '" + backend_arg + "'");

  FILE* out = open_protocol_channel();
  if (!out) {
    std::perror("autokernel-sandbox: dup(stdout)");
    return 1;
  }

  std::unique_ptr<ak::sandbox::Harness> harness = ak::sandbox::make_harness(*backend, device);
  ak::SandboxHello hello = harness->hello();
  send(out, hello);
  if (!hello.ready) {
    std::cerr << "autokernel-sandbox: not ready: " << hello.error << "\n";
    return 1;
  }

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
