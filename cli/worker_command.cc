// autokernel worker: one WorkerAgent per GPU (each with its own sandbox), or one CPU agent.
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <thread>

#include <unistd.h>
#include "cli/commands.h"
#include "cli/python_env.h"

#include <filesystem>

#include "common/clock.h"
#include "common/confine.h"
#include "common/process.h"
#include "coordinator/auth.h"
#include "worker/agent.h"
#include "worker/device.h"
#include "worker/metrics.h"
#include "worker/nvml.h"

namespace ak::cli {

int worker(const WorkerArgs& a) {
  if (a.confinement_report) {
    const ConfinementSupport support = probe_confinement();
    std::cout << "confinement layers on this machine (uid " << geteuid() << "):\n" << support.table();
    std::cout << (support.sufficient() ? "candidates can be confined\n"
                                       : "candidates cannot be confined here: the worker needs --unconfined\n");
    return 0;
  }
  // Probed once for every agent: the layers, the filter and what candidates must not see.
  // The folders as absolute paths from here on: a confined child resolves paths after its private
  // /tmp is mounted and its root made read-only, where a path relative to a working directory
  // under /tmp would name the hidden, read-only tree (every compile failed in `run` under /tmp).
  std::string cache_dir = a.cache_dir, state_dir = a.state_dir;
  std::vector<std::string> hidden;
  for (std::string* dir : {&cache_dir, &state_dir}) {
    std::error_code ec;
    std::filesystem::create_directories(*dir, ec);
    const std::filesystem::path abs = std::filesystem::absolute(*dir, ec);
    if (!ec) *dir = abs.lexically_normal().string();
    hidden.push_back(*dir);
  }
  if (a.inherit_env && !a.unconfined) {
    std::cerr << "autokernel worker: --inherit-env needs --unconfined (a confined candidate gets a scrubbed "
                 "environment: the search paths and the GPU selection alone)\n";
    return 2;
  }
  auto policy = make_confinement_policy(a.unconfined, hidden, a.candidate_memory_mb << 20, a.candidate_pids);
  if (!policy.ok()) {
    std::cerr << "autokernel worker: " << policy.status().message() << "\n";
    return 1;
  }
  Backend backend = Backend::kCpu;
  std::vector<int> devices;
  if (a.backend == "auto" || a.backend == "cuda") {
    auto gpus = detect_gpus();
    if (gpus.ok() && !gpus->empty()) {
      backend = Backend::kCuda;
      if (a.gpus == "all") {
        for (const auto& g : *gpus) devices.push_back(g.device_index);
      } else {
        std::stringstream ss(a.gpus);
        std::string item;
        while (std::getline(ss, item, ',')) {
          try {
            int d = std::stoi(item);
            if (d < 0 || d >= static_cast<int>(gpus->size())) throw std::out_of_range("ordinal");
            devices.push_back(d);
          } catch (const std::exception&) {
            std::cerr << "autokernel worker: --gpus " << a.gpus << ": '" << item << "' is not a GPU ordinal 0.."
                      << gpus->size() - 1 << "\n";
            return 2;
          }
        }
      }
    } else if (a.backend == "cuda") {
      std::cerr << "autokernel worker: --backend cuda but no GPU: "
                << (gpus.ok() ? std::string("the driver reports 0 devices") : gpus.status().message()) << "\n";
      return 1;
    } else {
      spdlog::info("no GPU ({}); offering the cpu backend", gpus.ok() ? "0 devices" : gpus.status().message());
    }
  } else if (a.backend != "cpu") {
    std::cerr << "autokernel worker: unknown --backend " << a.backend << "; expected auto, cpu or cuda\n";
    return 2;
  }
  if (backend == Backend::kCpu) devices = {-1};

  CurveKeyPair mine;
  std::string coordinator_key;
  if (a.key_file.empty() != a.coordinator_key_file.empty()) {
    std::cerr << "autokernel worker: CURVE needs both --key (this worker's NAME.key) and --coordinator-key (the "
                 "coordinator's NAME.pub)\n";
    return 2;
  }
  if (!a.key_file.empty()) {
    auto k = read_secret_key_file(a.key_file);
    auto c = read_public_key_file(a.coordinator_key_file);
    for (const Status& s : {k.status(), c.status()})
      if (!s.ok()) {
        std::cerr << "autokernel worker: " << s.message() << "\n";
        return 2;
      }
    mine = *k;
    coordinator_key = *c;
    spdlog::info("CURVE: worker key {}, coordinator key {}", mine.public_z85, coordinator_key);
  }

  const PythonChoice python = choose_python(a.python, a.python_env, AK_DEFAULT_PYTHON);
  const char* ld_path = std::getenv("LD_LIBRARY_PATH");
  SandboxEnvironment sandbox_env = sandbox_environment(python, AK_TORCH_VERSION, ld_path ? ld_path : "");
  if (a.inherit_env) {
    // This environment first, then the sandbox's own settings over it.
    std::vector<std::string> env = inherited_env(environ);
    env.insert(env.end(), sandbox_env.env.begin(), sandbox_env.env.end());
    sandbox_env.env = std::move(env);
    spdlog::warn("--inherit-env: the sandboxes get this worker's whole environment ({} variables)",
                 sandbox_env.env.size());
  }
  if (sandbox_env.warning)
    spdlog::warn("{}", sandbox_env.message);
  else
    spdlog::info("{}", sandbox_env.message);

  SystemClock clock;
  std::vector<std::unique_ptr<WorkerAgent>> agents;
  WorkerMetrics metrics;
  // Every agent of this process gets the same share of the host.
  const AgentParallelism par =
      agent_parallelism(backend, std::thread::hardware_concurrency(), devices.size(), a.slots, a.compile_threads);
  for (int d : devices) {
    WorkerOptions o;
    o.stats = std::make_shared<WorkerStats>();
    o.coordinator_endpoint = a.coordinator;
    o.curve_server_key = coordinator_key;
    o.curve_public_key = mine.public_z85;
    o.curve_secret_key = mine.secret_z85;
    o.backend = backend;
    o.device_index = d < 0 ? 0 : d;
    o.slots = par.slots;
    o.compile_threads = par.compile_threads;
    o.sandbox_path = a.sandbox.empty() ? self_exe_dir() + "/autokernel-sandbox" : a.sandbox;
    o.cache_dir = cache_dir;
    o.python = python.path;
    o.sandbox_env = sandbox_env.env;
    o.state_dir = state_dir;  // the outbox file, one per worker id
    o.heartbeat_ms = a.heartbeat_ms;
    o.kernelbench_slots = a.kb_slots;
    o.kernelbench_fork_server = a.kb_fork_server;
    o.confinement = *policy;
    if (!a.id.empty()) o.worker_id = devices.size() == 1 ? a.id : a.id + "-gpu" + std::to_string(d);
    auto agent = make_worker_agent(o, clock);
    if (!agent.ok()) {
      std::cerr << "autokernel worker: " << agent.status().message() << "\n";
      return 1;
    }
    const Capabilities& caps = (*agent)->capabilities();
    std::shared_ptr<const Nvml> nvml;
    if (backend == Backend::kCuda) {
      auto n = Nvml::open(caps.pci_id);
      if (n.ok())
        nvml = *n;
      else
        spdlog::warn("GPU {} ({}): no autokernel_gpu_* series on /metrics: {}", d, caps.gpu_name, n.status().message());
    } else {
      spdlog::info("cpu worker: no autokernel_gpu_* series on /metrics (no GPU)");
    }
    metrics.add_device(d < 0 ? "cpu" : std::to_string(d), caps.gpu_name, o.stats, std::move(nvml));
    agents.push_back(std::move(*agent));
  }
  std::string bind = a.metrics_bind;
  if (!bind.empty() && bind.find(':') == std::string::npos) bind = "127.0.0.1:" + bind;
  if (Status s = metrics.serve(bind); !s.ok()) {
    if (a.metrics_bind != WorkerArgs::kDefaultWorkerMetrics) {
      std::cerr << "autokernel worker: " << s.message() << "\n";
      return 1;
    }
    spdlog::warn("{} (the default; another worker on this host may hold it): this worker serves no /metrics",
                 s.message());
  } else if (!bind.empty()) {
    if (!is_loopback_address(bind)) spdlog::info("/metrics on {}, beyond loopback as --metrics says", bind);
    spdlog::info("worker /metrics on port {}", metrics.port());
  }
  std::vector<std::thread> threads;
  std::vector<Status> statuses(agents.size());
  for (size_t i = 0; i < agents.size(); ++i)
    threads.emplace_back([&, i] { statuses[i] = agents[i]->run(stop_flag()); });
  for (auto& t : threads) t.join();
  int rc = 0;
  for (const auto& s : statuses)
    if (!s.ok()) {
      std::cerr << "autokernel worker: " << s.message() << "\n";
      rc = 1;
    }
  return rc;
}

}  // namespace ak::cli
