// Compiler: turns a JobSpec's source + config into a loadable artefact, on the worker's CPU
// threads, ahead of the GPU measuring the previous job.
//
// Backends: cpu -> the host C++ compiler builds a shared object (-O3 -march=native -shared -fPIC,
// config as -D<NAME>=<value>); cuda -> NVRTC builds a cubin for the device's real architecture
// (sm_90a on Hopper; never PTX only), config as -D defines; triton -> a Python subprocess
// (worker/triton/compile.py, embedded in the binary) builds a cubin and its launch metadata
// (<path>.json), plus, for a kernel type that names divisible parameters, a second cubin that
// assumes them 16-divisible (<stem>.div16.cubin and .json; the sandbox picks it per launch when
// the values allow). Artefacts are cached in a directory
// by xxh64(source, options, compiler version, arch); concurrent compiles of the same key from
// several threads or processes are safe (write to a temp file, rename).
// compile() is thread-safe. A compile error is returned as a non-ok Status of code
// kInvalidArgument whose message holds the compiler log (truncated to 8 KiB), from which every
// diagnostic located outside the candidate's own source is withheld (an included file's text never
// reaches a result). An `#include` of an absolute path or one with ".." is refused before any
// compiler runs (kInvalidArgument). A spawned compiler that runs past the job's timeout_ms is killed
// with its process group: kTimedOut. Each cached artefact has its xxh64 beside it (<file>.xxh64);
// an artefact whose bytes do not match it is a cache miss, logged as an error, and compiled again.
// NVRTC runs in its own process (autokernel-nvrtc, worker/nvrtc_main.cc) under the same
// confinement and timeout as the host compiler; an NVRTC that crashes is a compile error.
//
// Details of make_compiler()'s compiler: an empty JobSpec::source means the registry's starter
// source for the backend; the entry name always comes from the registry (kernels/registry.h).
// cuda sources also get -DAK_DTYPE=<DType value>, so a config may not set AK_DTYPE. Hopper's
// "sm_90" is compiled as "sm_90a"; Capabilities::compute_capability is used when arch is empty.
#pragma once

#include <memory>
#include <string>

#include "common/confine.h"
#include "common/job.h"
#include "common/status.h"

namespace ak {

struct CompiledArtifact {
  std::string path;          // .so or .cubin (triton: its launch metadata beside it, .json)
  std::string entry;         // symbol (cpu) or kernel name (cuda)
  std::string source_hash;   // xxh64 hex of the source text
  std::string options_hash;  // xxh64 hex of options + compiler version + arch
  double compile_ms = 0;     // 0 on a cache hit
  bool cache_hit = false;
  // cuda: the PTX assembler's messages of a build that succeeded (warnings and performance notes
  // such as C7518, "wgmma.mma_async instructions are serialized"), lines naming files outside the
  // source withheld as for a failed build's log; empty on a cache hit.
  std::string diagnostics;
};

class Compiler {
 public:
  virtual ~Compiler() = default;
  virtual Result<CompiledArtifact> compile(const JobSpec& job, const Capabilities& caps) = 0;
};

struct CompilerOptions {
  std::string cache_dir;      // created if missing
  std::string host_cxx = "c++";
  // Python with triton 3.6, for the triton backend (searched in PATH unless a path).
  std::string python = "python3";
  // autokernel-nvrtc, for the cuda backend; empty: the one beside this process's executable.
  std::string nvrtc_path;
  // How candidate compiles (host compiler, triton) are confined (common/confine.h): they run with a
  // scrubbed environment, in a private folder that is their only writable view (the cache itself is
  // hidden from them), and the worker moves the result into the cache. The default confines nothing.
  ConfinementPolicy confinement;
};

// The real compiler for both backends.
std::unique_ptr<Compiler> make_compiler(const CompilerOptions& options);

// The PTX assembler's own lines of a build's diagnostics (CompiledArtifact::diagnostics) on one
// line, " | " between them, at most 1,000 characters: for a log, where a candidate's own text (its
// #warning lines) stays out and no line break from it can forge a log line.
std::string ptxas_notes(const std::string& diagnostics);

}  // namespace ak
