// A fake autokernel-sandbox for the supervisor tests. It speaks worker/sandbox_protocol.h and
// behaves according to the request's `entry`:
//   pass     reply PASS (latency 1.5 us; reason names backend, device and pid)
//   hang     never reply
//   segv     die of SIGSEGV
//   garbage  reply a line that is not JSON
//   exit3    exit with code 3
//   close    close stdout and keep running (an EOF from a live process)
//   crash    reply CRASH (a sticky CUDA error) and exit with code 3, as the real sandbox does
//   quit     reply PASS, then exit 0 (the sandbox dies between jobs)
//   progress-hang  report progress "verify.smoke", then never reply
//   progress-segv  report progress "verify.edge", then die of SIGSEGV
//   env      reply PASS with reason = JSON {"env": [...], "argv": [...], "tmp_writable": bool}: what
//            the supervisor gave the sandbox
// Start-up behaviour from `--hello ok|never|not-ready|garbage` (default ok). It writes one line
// to stderr at start so tests can check where the sandbox log goes.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "worker/sandbox_protocol.h"

extern char** environ;

int main(int argc, char** argv) {
  std::string backend, device, hello = "ok";
  std::vector<std::string> args(argv, argv + argc);
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--backend") backend = argv[i + 1];
    if (k == "--device") device = argv[i + 1];
    if (k == "--hello") hello = argv[i + 1];
  }
  std::fprintf(stderr, "fake sandbox log line pid %d\n", static_cast<int>(getpid()));
  if (hello == "never") {
    for (;;) pause();
  }
  if (hello == "garbage") {
    std::cout << "hello?" << std::endl;
    for (;;) pause();
  }
  ak::SandboxHello h;
  h.ready = hello == "ok";
  h.device = "cpu";
  h.copy_bandwidth_gbps = 12.5;
  h.torch_version = "fake";
  if (!h.ready) h.error = "CUDA backend asked for but no GPU (fake)";
  std::cout << nlohmann::json(h).dump() << std::endl;
  if (!h.ready) return 1;

  std::string line;
  while (std::getline(std::cin, line)) {
    ak::SandboxRequest req = nlohmann::json::parse(line).get<ak::SandboxRequest>();
    if (req.entry.rfind("progress-", 0) == 0) {
      std::cout << nlohmann::json(ak::SandboxProgress{req.entry == "progress-hang" ? "verify.smoke" : "verify.edge"}).dump()
                << std::endl;
      if (req.entry == "progress-segv") raise(SIGSEGV);
      for (;;) pause();
    } else if (req.entry == "hang") {
      for (;;) pause();
    } else if (req.entry == "segv") {
      raise(SIGSEGV);
    } else if (req.entry == "garbage") {
      std::cout << "this is not json" << std::endl;
    } else if (req.entry == "exit3") {
      _exit(3);
    } else if (req.entry == "close") {
      std::fclose(stdout);
      close(STDOUT_FILENO);
      for (;;) pause();
    } else if (req.entry == "env") {
      nlohmann::json e = nlohmann::json::array();
      for (char** p = environ; p && *p; ++p) e.push_back(*p);
      const char* tmp = std::getenv("TMPDIR");
      bool writable = false;
      if (tmp) {
        std::string path = std::string(tmp) + "/probe";
        if (FILE* f = std::fopen(path.c_str(), "w")) {
          writable = std::fputs("x", f) >= 0;
          std::fclose(f);
        }
      }
      ak::SandboxReply r;
      r.status = ak::ResultStatus::kPass;
      r.reason = nlohmann::json{{"env", e}, {"argv", args}, {"tmp_writable", writable}}.dump();
      std::cout << nlohmann::json(r).dump() << std::endl;
    } else if (req.entry == "crash") {
      ak::SandboxReply r;
      r.status = ak::ResultStatus::kCrash;
      r.stage = "verify";
      r.reason = "CUDA_ERROR_ILLEGAL_ADDRESS (fake)";
      std::cout << nlohmann::json(r).dump() << std::endl;
      _exit(3);
    } else {
      ak::SandboxReply r;
      r.status = ak::ResultStatus::kPass;
      r.stage = "measure";
      r.reason = "backend=" + backend + " device=" + device + " pid=" + std::to_string(getpid()) +
                 " job=" + req.job.job_id;
      r.m.latency_us = 1.5;
      r.m.compile_ms = req.compile_ms;
      std::cout << nlohmann::json(r).dump() << std::endl;
      if (req.entry == "quit") _exit(0);
    }
  }
  return 0;
}
