// WorkerMetrics: a worker daemon's Prometheus series (names in common/metric_names.h), served on
// /metrics by prometheus-cpp's Exposer.
//
// Only the worker daemon serves them, never the sandbox: prometheus-cpp's Exposer fails in a
// process that links libtorch, and the daemon links neither libtorch nor a CUDA runtime. Each
// device the daemon drives (one agent per GPU, or the CPU) adds its WorkerStats and, for a GPU,
// its NVML handle; a scrape reads the stats' atomics and asks NVML for the GPU's busy fraction,
// clocks, power, temperature and clock-event reasons at that moment. A device without NVML
// exports no autokernel_gpu_* series (add_device says why in the log); everything else is the same
// on CPU and GPU workers.
//
// Thread-safe: scrapes run on the Exposer's threads while agents update their stats.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>

#include "common/status.h"
#include "worker/nvml.h"
#include "worker/stats.h"

namespace ak {

class WorkerMetrics {
 public:
  WorkerMetrics();
  ~WorkerMetrics();
  WorkerMetrics(const WorkerMetrics&) = delete;
  WorkerMetrics& operator=(const WorkerMetrics&) = delete;

  // One device's series, labelled device=`device` ("0" for a CUDA ordinal, "cpu"); `nvml` null
  // means no autokernel_gpu_* series for it. `gpu_model` labels the GPU series.
  void add_device(const std::string& device, const std::string& gpu_model, std::shared_ptr<const WorkerStats> stats,
                  std::shared_ptr<const Nvml> nvml);
  // Starts serving on `bind_address` ("127.0.0.1:0" picks a free port; read it with port()).
  // Empty: not served. kUnavailable when the address cannot be bound.
  Status serve(const std::string& bind_address);
  int port() const;  // 0 when not serving

  // What a scrape returns now (tests).
  std::vector<prometheus::MetricFamily> collect() const;

 private:
  class Devices;
  std::shared_ptr<Devices> devices_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace ak
