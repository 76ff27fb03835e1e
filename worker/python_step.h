// One Python step of a job (a KernelBench harness step, a model profile), run as a fresh process
// in its own process group until a deadline, confined by the worker's policy (common/confine.h):
//   - the job's folder is its only writable view of the worker's folders, and its HOME; its files
//     are handed to the child's uid;
//   - `read_only` paths (the script) and `shared` files (a GPU turn lock every step of one GPU
//     opens read-write, created 0666 when missing) are bound at their places;
//   - the interpreter's installation and virtual environment stay visible;
//   - its own cgroup, a scrubbed environment (kept_env_names() and PYTHONPATH, then `env`).
// Unconfined (an empty policy), the step inherits the worker's environment plus `env`.
// At its deadline, or after it exits, its whole group (and pid namespace and cgroup) is killed.
//
// Cancelling: `started(pgid)` is called once the step runs, from the calling thread, with the
// group to kill; it returns false when the job was cancelled meanwhile, and the group is killed at
// once. `ended()` is called when the group is gone. Both may be empty.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "common/confine.h"

namespace ak {

struct PythonStep {
  std::string python = "python3";
  std::vector<std::string> args;       // after the interpreter: the script and its arguments
  std::filesystem::path dir;           // the job's folder
  std::filesystem::path log;           // stdout and stderr
  std::vector<std::string> read_only;  // bound read-only when confined
  std::vector<std::string> shared;     // files bound read-write when confined
  std::vector<std::string> env;        // NAME=value on top
  std::string cgroup_name;             // unique per step and process
};

struct PythonStepOutcome {
  bool timed_out = false;
  int exit_code = 0;  // its exit code, 128 + signal, or -1 when it could not start (why in the log)
};

PythonStepOutcome run_python_step(const PythonStep& step, const ConfinementPolicy& policy,
                                  std::chrono::steady_clock::time_point deadline,
                                  const std::function<bool(pid_t)>& started = {},
                                  const std::function<void()>& ended = {});

}  // namespace ak
