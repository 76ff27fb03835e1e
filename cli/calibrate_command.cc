// autokernel calibrate: starts the sandbox for one device, which measures the device's ceilings
// (copy bandwidth; cuBLAS GEMM rates on a GPU) and matches it in the datasheet table, and prints
// them side by side. The same figures a worker announces in READY.
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/python_env.h"
#include "common/process.h"
#include "worker/device.h"
#include "worker/supervisor.h"

namespace ak::cli {

int calibrate(const CalibrateArgs& a) {
  Backend backend = Backend::kCpu;
  std::string device_name = "cpu";
  if (a.backend == "auto" || a.backend == "cuda") {
    auto gpus = detect_gpus();
    if (gpus.ok() && !gpus->empty()) {
      if (a.device < 0 || a.device >= static_cast<int>(gpus->size())) {
        std::cerr << "autokernel calibrate: --device " << a.device << " does not exist; this machine has "
                  << gpus->size() << " GPU(s)\n";
        return 2;
      }
      backend = Backend::kCuda;
      device_name = (*gpus)[size_t(a.device)].gpu_name + " (" + (*gpus)[size_t(a.device)].pci_device_id + ")";
    } else if (a.backend == "cuda") {
      std::cerr << "autokernel calibrate: --backend cuda but no GPU: "
                << (gpus.ok() ? std::string("the driver reports 0 devices") : gpus.status().message()) << "\n";
      return 1;
    }
  } else if (a.backend != "cpu") {
    std::cerr << "autokernel calibrate: unknown --backend " << a.backend << "; expected auto, cpu or cuda\n";
    return 2;
  }
  SandboxOptions o;
  o.executable = a.sandbox.empty() ? self_exe_dir() + "/autokernel-sandbox" : a.sandbox;
  o.backend = backend;
  o.device_index = backend == Backend::kCuda ? a.device : 0;
  const char* ld_path = std::getenv("LD_LIBRARY_PATH");
  const SandboxEnvironment env = sandbox_environment(choose_python(a.python, a.python_env, AK_DEFAULT_PYTHON),
                                                     AK_TORCH_VERSION, ld_path ? ld_path : "");
  if (env.warning) std::cerr << "autokernel calibrate: " << env.message << "\n";
  o.extra_env = env.env;
  SandboxSupervisor sup(o);
  if (Status s = sup.start(); !s.ok()) {
    std::cerr << "autokernel calibrate: " << s.message() << "\n";
    return 1;
  }
  const Ceilings& c = sup.hello().ceilings;
  if (a.json) {
    std::cout << nlohmann::json{{"device", sup.hello().device}, {"ceilings", c}}.dump(2) << "\n";
    return 0;
  }
  auto get = [](const std::map<std::string, double>& m, const std::string& k) {
    auto it = m.find(k);
    return it == m.end() ? 0.0 : it->second;
  };
  std::printf("device      %s\n", device_name.c_str());
  std::printf("datasheet   %s (%s)\n", c.datasheet_name.empty() ? "none" : c.datasheet_name.c_str(),
              c.datasheet_match.c_str());
  std::printf("%-22s %12s %12s %9s\n", "ceiling", "measured", "datasheet", "measured%");
  auto row = [&](const std::string& what, double measured, double sheet) {
    if (sheet > 0)
      std::printf("%-22s %12.1f %12.1f %8.1f%%\n", what.c_str(), measured, sheet, 100.0 * measured / sheet);
    else
      std::printf("%-22s %12.1f %12s %9s\n", what.c_str(), measured, "-", "-");
  };
  row("copy bandwidth GB/s", c.copy_bandwidth_gbps, c.datasheet_bandwidth_gbps);
  for (const char* k : {"fp16", "bf16", "tf32", "fp32"})
    if (get(c.gemm_tflops, k) > 0) row(std::string("GEMM ") + k + " TFLOP/s", get(c.gemm_tflops, k), get(c.datasheet_tflops, k));
  // Rows whose working set fits in it, timed hot, get no % of the copy bandwidth (docs/RESULTS.md).
  if (c.cache_bytes > 0) std::printf("last-level cache       %9.1f MiB\n", double(c.cache_bytes) / (1 << 20));
  return 0;
}

}  // namespace ak::cli
