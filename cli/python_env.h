// Which Python a worker runs and where that Python's torch lives (issue 21, "Install anywhere").
//
// The worker runs Python for the triton backend's compiler, the KernelBench harness and the model
// pipeline, and its sandbox (autokernel-sandbox) links libtorch. An installed tree carries neither:
// both come from the Python environment the worker is pointed at, chosen in this order:
//   1. --python PATH
//   2. the AK_PYTHON environment variable
//   3. the Python configured at build time (cmake -DAK_PYTHON=...), where that file still exists
//   4. python3 on PATH
// The sandbox finds libtorch through LD_LIBRARY_PATH set to the chosen Python's torch/lib (when its
// torch is the version the sandbox was built against), else through its RUNPATH ($ORIGIN/../lib in
// an installed tree, the configure-time torch in the build tree). The functions are thread-safe.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace ak::cli {

struct PythonChoice {
  std::string path;    // what the worker runs: as given, or the full path found on PATH
  std::string source;  // how it was chosen: "--python", "AK_PYTHON", "the build's default", "PATH"
};

// The first of flag, env_value, configured (only if it is an existing file) and python3 on PATH
// that is not empty. Where python3 is not on PATH either, path is "python3" and source "PATH":
// starting it fails later with a message that names it.
PythonChoice choose_python(const std::string& flag, const std::string& env_value, const std::string& configured);

struct TorchLocation {
  std::string version;  // torch.__version__ as torch/version.py has it, e.g. "2.11.0+cu130"
  std::string lib_dir;  // the folder of libtorch_cpu.so: <site-packages>/torch/lib
};

// Finds torch for `python` without importing it (importlib's find_spec takes about 50 ms; an import
// takes seconds). kNotFound "<python> has no torch" when that Python cannot import it;
// kUnavailable when the Python cannot be started or does not answer within 20 s.
Result<TorchLocation> locate_torch(const std::string& python);

// What a worker (or calibrate) starts its sandboxes with, for the Python `choice`: the
// environment entries ("LD_LIBRARY_PATH=<torch lib>[:inherited]" when that Python has torch of the
// release `built_torch`; none otherwise) and one line for the log that names the Python, how it
// was chosen and its torch, or says what is wrong ("... has no torch: KernelBench, model and
// triton jobs will fail; the sandbox loads the libtorch of its RUNPATH; give --python or
// AK_PYTHON"). inherited_ld_path: this process's LD_LIBRARY_PATH, kept after torch's folder.
struct SandboxEnvironment {
  std::vector<std::string> env;
  std::string message;
  bool warning = false;  // message describes a problem
};
SandboxEnvironment sandbox_environment(const PythonChoice& choice, const std::string& built_torch,
                                       const std::string& inherited_ld_path);

// True when `found` ("2.11.0+cu130") is the release `built` ("2.11.0") names; true when built is
// empty (a build without the sandbox knows no torch version).
bool same_torch_release(const std::string& built, const std::string& found);

}  // namespace ak::cli
