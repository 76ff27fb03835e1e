// A loaded candidate of each backend (cpu shared object, cuda cubin, Triton cubin with its launch
// metadata) and how to call it on libtorch tensors: the kernel type's harness (kernels/reference.h)
// builds the call's parameters, the kernel type's spec (kernels/registry.h) its launch geometry.
// Shared by the sandbox's harness (worker/sandbox/harness.cc) and the torch library that plugs
// tuned kernels into a running model (models/plug/ops.cc). libtorch translation units only.
//
// Launches go to the CUDA default (legacy) stream unless set_stream() names another (the torch
// library passes PyTorch's current stream). A Candidate is not thread-safe; it must not outlive the CudaDriver it uses.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/job.h"
#include "kernels/registry.h"
#include "worker/cuda_driver.h"

namespace ak::sandbox {

// A failure with the stage it happened in; the harness turns it into a reply. An empty stage
// means "the stage running now".
struct StageError {
  ResultStatus status;
  std::string stage;
  std::string reason;
};

[[noreturn]] inline void fail(const std::string& stage, const std::string& reason,
                              ResultStatus status = ResultStatus::kFail) {
  throw StageError{status, stage, reason};
}

// A loaded candidate: launch() queues one call on the inputs of `shape`, writing out; throws
// StageError (launch errors).
class Candidate {
 public:
  virtual ~Candidate() = default;
  virtual void launch(const std::vector<at::Tensor>& inputs, at::Tensor& out, const std::vector<int64_t>& shape) = 0;
  // cuda and triton: the stream later launches go to (a CUstream; nullptr, the default, is the
  // legacy default stream). cpu: ignored.
  virtual void set_stream(void* stream) {}
  // What launch() would set up on the device before a call on these tensors (cuda: TMA tensor
  // maps, kernels/registry.h), done now so that a timed launch() finds it ready. Optional.
  virtual void prepare(const std::vector<at::Tensor>& inputs, const at::Tensor& out,
                       const std::vector<int64_t>& shape) {}
};

// The device a cuda or Triton candidate is loaded on; its context must be current on the calling
// thread.
struct CudaDevice {
  const CudaDriver* drv = nullptr;
  std::string arch;                  // "sm_90a", for error messages
  int max_shared_optin = 48 * 1024;  // the most shared memory, static and dynamic, a block may have [bytes]
  // Build the TMA tensor maps a kernel asks for (kernels/registry.h).
  bool tensor_maps = true;
  // How a slot of maps reaches the device. nullptr: a host-to-device copy on the call's stream (the
  // sandbox: no code of the candidate runs outside its timed launches). Else the kernel of
  // load_tensor_map_writer(), launched on the call's stream, which a CUDA graph that captures the
  // call captures with it (the torch library, models/plug/ops.cc). A call on a capturing stream
  // without a writer gets no maps: the kernel runs its path without TMA.
  CUfunction map_writer = nullptr;
};

// The tensor-map slot writer: PTX text (sm_90) of one kernel, kTensorMapWriterEntry, that copies
// its by-value image of a slot (up to kernels::tensor_map_slot_bytes(8) bytes, as u64 words) to a
// device address and releases it to the tensor-map proxy; written here, so the candidate's module
// has no part in it.
inline constexpr const char* kTensorMapWriterEntry = "ak_write_tensor_map_slot";
std::string tensor_map_writer_ptx();
// Loads it into the current context once (the driver compiles the PTX) and returns the kernel;
// throws StageError at "load" when the driver cannot.
CUfunction load_tensor_map_writer(const CudaDriver& drv);

// Each throws StageError at stage "load" when the artefact cannot be read or loaded, or lacks its
// entry point.
// cpu: dlopens a private copy of the shared object and resolves the extern "C" `entry`.
std::unique_ptr<Candidate> load_cpu_candidate(const std::string& artifact_path, const std::string& entry,
                                              const std::string& kernel_type, DType dtype);
// cuda: a cubin with the __global__ `entry`, launched by the spec's geometry for `config`.
std::unique_ptr<Candidate> load_cuda_candidate(const CudaDevice& dev, const std::string& artifact_path,
                                               const std::string& entry, const kernels::KernelSpec& spec,
                                               const std::map<std::string, int64_t>& config, DType dtype);
// triton: <stem>.cubin with <stem>.json (and the 16-divisible build <stem>.div16.* if present),
// from worker/triton/compile.py.
std::unique_ptr<Candidate> load_triton_candidate(const CudaDevice& dev, const std::string& artifact_path,
                                                 const kernels::KernelSpec& spec,
                                                 const std::map<std::string, int64_t>& config, DType dtype);

// The launches one call of a cuda or triton candidate makes for `shape`, as JSON text, so that a
// launcher without the farm can run it (`autokernel export --hf`, models/export/README.md):
//   {"inputs": [{"sizes": [...], "dtype": <c10::ScalarType value>, "dtype_name": "BFloat16"}, ...],
//    "output": {...as an input}, "workspace_bytes": n,
//    "builds": [{"cubin": path, "function": name}, ...],
//    "launches": [{"grid": [x, y, z], "build": 0, "block": [x, y, z], "shared_bytes": n,
//                  "params": [["input", k, offset] | ["output", 0, offset] | ["workspace", 0, offset]
//                             | ["value", v, 0], ...],
//                  "aligned": {"build": 1, "block": [...], "shared_bytes": n, "divisible": [param index, ...]}}]}
// One launch per phase (kernels/registry.h, cuda_phases); "aligned" (triton only) is the build the
// sandbox launches when every listed parameter's value is a multiple of 16. Needs no device: the
// harness's parameters are taken from tensors at made-up addresses. Throws StageError at "load"
// as the loaders do.
std::string launch_plan(const std::string& backend, const std::string& artifact_path, const std::string& entry,
                        const kernels::KernelSpec& spec, const std::map<std::string, int64_t>& config, DType dtype,
                        const std::vector<int64_t>& shape);

}  // namespace ak::sandbox
