// Built-in candidates: for a level-1 KernelBench problem whose forward is a single op of the
// kernel library, a KernelBench candidate file (Python, defines ModelNew) that launches the
// library's Triton source (kernels/<type>/<type>.py, embedded verbatim) with a tuned or default
// configuration, so `autokernel kb sweep --builtin` runs without generations.
//
// Which problems: a fixed list of KernelBench level-1 problem names (builtin_problems()), and for
// each a check of the problem's source by kernelbench/match.py (Python's ast, run as
// `python -c` with BuiltinOptions::python; the source is parsed, never run): Model's __init__ and
// forward, get_inputs and get_init_inputs must be exactly the single op and input ranks the
// template assumes (docstrings, comments and whitespace aside), and the template must be able to
// serve the declared shape ("template softmax cannot serve shape [...]: reason" otherwise). The
// generated forward computes its launch from the runtime tensor shapes and raises for a rank the
// template does not handle; the declared shape (the problem's module-level constants, evaluated
// when they are integer arithmetic) picks the tuned configuration. kernelbench/README.md lists
// what is covered and what is not, and why.
//
// Configuration: with a tuning database (kernels/tuned.h), the entry for (kernel type, backend
// "triton", GPU model, precision) at the declared shape or the nearest tuned shape, over the
// spec's default Triton configuration; without one, or when nothing matches, the default. The
// file's header comment says which.
//
// Functions of their arguments (builtin_candidate runs one Python process per call); thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "kernelbench/bridge.h"
#include "kernels/tuned.h"

namespace ak::kernelbench {

struct BuiltinOptions {
  std::string precision = "fp32";  // the sweep's precision: fp32, fp16 or bf16 (the tuning key's dtype)
  // Not owned; must outlive the call. nullptr: the spec's default configuration.
  const kernels::TunedConfigs* tuned = nullptr;
  std::string tuning_path;  // named in the header comment when `tuned` is set
  std::string gpu_model;    // the tuned entries' GPU model; required with `tuned`
  std::string python = "python3";  // runs kernelbench/match.py (standard library only)
};

struct BuiltinCandidate {
  std::string kernel_type;                  // "softmax"
  std::string source;                       // the candidate file's text
  std::map<std::string, int64_t> config;    // the Triton tunables launched (BLOCK, AK_NUM_WARPS, ...)
  bool tuned = false;                       // config came from the tuning database
  std::string config_origin;                // one line: "default ..." or "tuned ..."
  std::vector<int64_t> declared_shape;      // the kernel type's shape; empty when not evaluable
};

// The built-in candidate of `p`. Errors: kNotFound when the problem is not covered, with the
// reason ("40_LayerNorm.py: __init__ is ..., the layernorm template expects ...", or "template
// softmax cannot serve shape ..."); kInvalidArgument for bad options (unknown precision, `tuned`
// without a GPU model); kUnavailable, kTimedOut or kInternal when `python` cannot run match.py.
Result<BuiltinCandidate> builtin_candidate(const Problem& p, const BuiltinOptions& o);

// The level-1 problem names (file name without ".py") that have a template, with their kernel
// type, in problem-id order.
std::vector<std::pair<std::string, std::string>> builtin_problems();

// KernelBench's name of a generation file: "level_1_problem_23_sample_0_kernel.py".
std::string generation_file_name(int level, int problem_id, int sample_id);

}  // namespace ak::kernelbench
