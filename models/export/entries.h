// The tuned kernels of an `autokernel export --hf` package, as data: what csrc/entries.cc (written
// by the export, models/export_hf.py) holds and torch-ext/torch_binding.cpp launches. Each entry
// is one kernel for one exact shape and dtype, tuned, verified and timed on the farm, with the
// launches one call makes (grid, block, dynamic shared memory, parameters) fixed at export time.
#pragma once

#include <cstddef>
#include <cstdint>

namespace akx {

// One kernel parameter (8 bytes): a tensor's address plus an offset, or a value.
enum class ParamKind : int8_t { kInput, kOutput, kWorkspace, kValue };
struct Param {
  ParamKind kind;
  int64_t index;   // kInput: which input; kValue: the value
  int64_t offset;  // bytes added to the tensor's address
};

// A cubin and the kernel in it.
struct Build {
  const unsigned char* image;
  size_t size;
  const char* function;
};

struct Variant {
  int build;  // index into Entry::builds; -1: none
  unsigned block[3];
  unsigned shared_bytes;  // dynamic shared memory per block
};

// One kernel launch. `aligned` (a Triton kernel's 16-divisible build) runs instead of `plain`
// when every parameter listed in `divisible` is a multiple of 16.
struct Launch {
  unsigned grid[3];
  Variant plain;
  Variant aligned;
  const int* divisible;
  int n_divisible;
  const Param* params;
  int n_params;
};

// A tensor's sizes and dtype (a c10::ScalarType value).
struct TensorDesc {
  int ndim;
  int64_t sizes[6];
  int dtype;
};

struct Entry {
  const char* kernel_type;  // "softmax", "matmul", ...
  const char* dtype;        // "bf16"
  const TensorDesc* inputs;
  int n_inputs;
  TensorDesc output;
  int64_t workspace_bytes;  // scratch memory of one call; 0: none
  const Build* builds;
  int n_builds;
  const Launch* launches;  // in order, on one stream
  int n_launches;
};

extern const Entry kEntries[];
extern const int kNumEntries;
extern const char* const kArch;  // "sm_90a": what the cubins were built for

// The norm kernel types by the eps they compute with (models/classify.py, NORM_TYPES: each eps in
// use is a type of its own), whether or not an entry of theirs was exported.
struct NormType {
  double eps;
  const char* kernel_type;
};
extern const NormType kLayerNorms[];
extern const int kNumLayerNorms;
extern const NormType kRmsNorms[];
extern const int kNumRmsNorms;

}  // namespace akx
