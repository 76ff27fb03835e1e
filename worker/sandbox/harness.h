// The sandbox's harness: owns the device (the CUDA context on the cuda backend), makes inputs with
// libtorch, verifies a candidate against the kernel type's reference, then times it and the
// PyTorch baseline with the same method. Used by worker/sandbox/main.cc only; this header keeps
// libtorch out of every translation unit but harness.cc.
//
// Not thread-safe: one harness serves one request at a time on the sandbox's main thread.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "worker/sandbox_protocol.h"

namespace ak::sandbox {

class Harness {
 public:
  virtual ~Harness() = default;
  // The readiness handshake. For cuda without a usable GPU, ready=false and error says why.
  virtual SandboxHello hello() = 0;
  // Runs one request. Never throws: failures become a reply with stage and reason. A reply of
  // status CRASH (a sticky CUDA error: the context is unusable) must be the sandbox's last.
  virtual SandboxReply run(const SandboxRequest& request) = 0;
  // Called with the stage's name when a request enters it (before the stage runs).
  virtual void set_progress(std::function<void(const std::string&)> progress) = 0;
};

// Sets up the backend (cpu, or cuda on device `device`) and measures the copy bandwidth.
std::unique_ptr<Harness> make_harness(Backend backend, int device);

}  // namespace ak::sandbox
