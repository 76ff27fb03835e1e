// The libtorch side of each kernel type: inputs, reference, PyTorch baseline and how to call a
// candidate. Compiled only into the sandbox (worker/sandbox/), the one executable that links
// libtorch; the rest of the farm reads kernels/registry.h. Each kernel type defines one
// TorchHarness in kernels/<type>/reference.cc and adds one line to kernels/references.cc.
//
// All functions may throw (c10::Error, std::exception); the sandbox turns that into a reply.
// They run on the sandbox's single thread.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/job.h"
#include "kernels/registry.h"

namespace ak::kernels {

// The parameter array of cuLaunchKernel. Every parameter of a farm kernel is 8 bytes (a device
// pointer or an int64), stored by value here; args() points at the stored values.
class KernelParams {
 public:
  void add_pointer(const void* p) { values_.push_back(reinterpret_cast<uint64_t>(p)); }
  void add_i64(int64_t v) { values_.push_back(static_cast<uint64_t>(v)); }
  // Valid until the next add_*; `this` must outlive the launch call.
  void** args() {
    ptrs_.clear();
    for (uint64_t& v : values_) ptrs_.push_back(&v);
    return ptrs_.data();
  }
  size_t size() const { return values_.size(); }
  // The i-th parameter's value (a pointer as its address).
  uint64_t value(size_t i) const { return values_.at(i); }

 private:
  std::vector<uint64_t> values_;
  std::vector<void*> ptrs_;
};

// One set of hostile inputs for stage verify.hostile: values near the dtype's maximum, near zero,
// mixed scales, all zeros, all equal, and +-inf / NaN where the op defines a result for them.
struct HostileCase {
  std::string name;                // "near_max", "all_zeros", ...
  std::vector<at::Tensor> inputs;  // the job's shape and dtype, on the sandbox's device
};

struct TorchHarness {
  // Realistic, seeded inputs of the job's shape and dtype on `device` (never all zeros).
  std::vector<at::Tensor> (*make_inputs)(const std::vector<int64_t>& shape, DType dtype,
                                         c10::Device device, uint64_t seed);
  // An output tensor for those inputs; its contents are undefined (the sandbox poisons it).
  at::Tensor (*make_output)(const std::vector<at::Tensor>& inputs);
  // The strongest PyTorch op computed in fp32 or wider (softmax: fp64) from the same inputs;
  // returns an fp32 tensor of the output's shape.
  at::Tensor (*reference)(const std::vector<at::Tensor>& inputs);
  // The PyTorch op in the job's dtype, writing `out`: the timed baseline.
  void (*baseline)(const std::vector<at::Tensor>& inputs, at::Tensor& out);
  // cpu backend: calls the candidate's entry point (from dlsym) and returns its result code
  // (0 = success).
  int (*call_cpu)(void* entry, const std::vector<at::Tensor>& inputs, at::Tensor& out, DType dtype);
  // cuda backend: the kernel's parameters, in order.
  void (*cuda_params)(const std::vector<at::Tensor>& inputs, at::Tensor& out, KernelParams& params);
  // The hostile input sets of stage verify.hostile, all of the given shape and dtype. The
  // reference defines the expected output for each (NaN where PyTorch gives NaN).
  std::vector<HostileCase> (*hostile_inputs)(const std::vector<int64_t>& shape, DType dtype, c10::Device device,
                                             uint64_t seed);
  // Optional (nullptr: 1 everywhere): the scale of each output's rounding error, an fp32 tensor
  // of the output's shape. The sandbox then checks |out - ref| <= atol * scale + rtol * |ref|,
  // so a sum whose terms cancel is held to the size of its terms (sum: sum of |x| per row).
  // `tolerance` is the job's dtype's, for a scale with a term of absolute size, which enters
  // divided by tolerance.atol.
  at::Tensor (*tolerance_scale)(const std::vector<at::Tensor>& inputs, const Tolerance& tolerance);
};

// nullptr if the kernel type has no libtorch harness.
const TorchHarness* find_harness(std::string_view kernel_type);

}  // namespace ak::kernels
