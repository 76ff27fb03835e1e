#include "worker/metrics.h"

#include <utility>

#include "common/metric_names.h"

namespace ak {

using namespace prometheus;
namespace mn = metric_names;

namespace {

struct Device {
  std::string device, gpu_model;
  std::shared_ptr<const WorkerStats> stats;
  std::shared_ptr<const Nvml> nvml;
};

ClientMetric sample(std::vector<ClientMetric::Label> labels, double v, MetricType type) {
  ClientMetric m;
  m.label = std::move(labels);
  (type == MetricType::Counter ? m.counter.value : m.gauge.value) = v;
  return m;
}

// (bit, label) of every clock-event reason worker/nvml.h knows.
constexpr std::pair<uint64_t, const char*> kReasons[] = {{kReasonGpuIdle, "gpu_idle"},
                                                         {kReasonApplicationsClocks, "applications_clocks"},
                                                         {kReasonSwPowerCap, "sw_power_cap"},
                                                         {kReasonHwSlowdown, "hw_slowdown"},
                                                         {kReasonSyncBoost, "sync_boost"},
                                                         {kReasonSwThermal, "sw_thermal"},
                                                         {kReasonHwThermal, "hw_thermal"},
                                                         {kReasonHwPowerBrake, "hw_power_brake"},
                                                         {kReasonDisplayClocks, "display_clocks"}};

}  // namespace

class WorkerMetrics::Devices : public Collectable {
 public:
  void add(Device d) {
    std::lock_guard<std::mutex> lock(mu_);
    devices_.push_back(std::move(d));
  }

  std::vector<MetricFamily> Collect() const override {
    std::vector<Device> devices;
    {
      std::lock_guard<std::mutex> lock(mu_);
      devices = devices_;
    }
    auto family = [](const char* name, const char* help, MetricType type) {
      return MetricFamily{name, help, type, {}};
    };
    MetricFamily finished =
        family(mn::kWorkerJobsFinished, "Jobs this worker finished, by result status", MetricType::Counter);
    MetricFamily held =
        family(mn::kWorkerJobsHeld, "Jobs leased to this worker and not yet finished", MetricType::Gauge);
    MetricFamily queue = family(mn::kWorkerCompileQueue, "Jobs waiting for a compile thread", MetricType::Gauge);
    MetricFamily restarts =
        family(mn::kWorkerSandboxRestarts, "Sandboxes started after the first (a candidate crashed or hung one)",
               MetricType::Counter);
    MetricFamily hits = family(mn::kWorkerCacheHits, "Compiles answered from the compile cache", MetricType::Counter);
    MetricFamily misses = family(mn::kWorkerCacheMisses, "Compiles that ran a compiler", MetricType::Counter);
    MetricFamily busy = family(mn::kGpuBusy, "Share of the last NVML sample period in which a kernel ran on the GPU",
                               MetricType::Gauge);
    MetricFamily sm = family(mn::kGpuSmClock, "GPU SM clock", MetricType::Gauge);
    MetricFamily mem = family(mn::kGpuMemClock, "GPU memory clock", MetricType::Gauge);
    MetricFamily power = family(mn::kGpuPower, "GPU power draw", MetricType::Gauge);
    MetricFamily temp = family(mn::kGpuTemperature, "GPU temperature", MetricType::Gauge);
    MetricFamily throttle =
        family(mn::kGpuThrottle, "1 while the GPU's clocks are held down for this reason (NVML clock-event reasons)",
               MetricType::Gauge);
    for (const Device& d : devices) {
      const WorkerStats& s = *d.stats;
      for (size_t i = 0; i < s.finished.size(); ++i)
        finished.metric.push_back(
            sample({{"device", d.device}, {"status", result_status_name(static_cast<ResultStatus>(i))}},
                   static_cast<double>(s.finished[i].load()), MetricType::Counter));
      const std::vector<ClientMetric::Label> dev = {{"device", d.device}};
      held.metric.push_back(sample(dev, static_cast<double>(s.jobs_held.load()), MetricType::Gauge));
      queue.metric.push_back(sample(dev, static_cast<double>(s.compile_queue.load()), MetricType::Gauge));
      restarts.metric.push_back(sample(dev, static_cast<double>(s.sandbox_restarts.load()), MetricType::Counter));
      hits.metric.push_back(sample(dev, static_cast<double>(s.compile_cache_hits.load()), MetricType::Counter));
      misses.metric.push_back(sample(dev, static_cast<double>(s.compile_cache_misses.load()), MetricType::Counter));
      if (!d.nvml) continue;
      const std::vector<ClientMetric::Label> gpu = {{"device", d.device}, {"gpu_model", d.gpu_model}};
      if (auto b = d.nvml->busy_fraction()) busy.metric.push_back(sample(gpu, *b, MetricType::Gauge));
      const Telemetry t = d.nvml->read();
      if (!t.valid) continue;
      sm.metric.push_back(sample(gpu, t.sm_clock_mhz * 1e6, MetricType::Gauge));
      mem.metric.push_back(sample(gpu, t.mem_clock_mhz * 1e6, MetricType::Gauge));
      power.metric.push_back(sample(gpu, t.power_w, MetricType::Gauge));
      temp.metric.push_back(sample(gpu, t.temperature_c, MetricType::Gauge));
      for (const auto& [bit, name] : kReasons) {
        auto labels = gpu;
        labels.push_back({"reason", name});
        throttle.metric.push_back(sample(std::move(labels), (t.reasons & bit) ? 1 : 0, MetricType::Gauge));
      }
    }
    std::vector<MetricFamily> out;
    for (MetricFamily* f :
         {&finished, &held, &queue, &restarts, &hits, &misses, &busy, &sm, &mem, &power, &temp, &throttle})
      if (!f->metric.empty()) out.push_back(std::move(*f));
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<Device> devices_;
};

WorkerMetrics::WorkerMetrics() : devices_(std::make_shared<Devices>()) {}
WorkerMetrics::~WorkerMetrics() = default;

void WorkerMetrics::add_device(const std::string& device, const std::string& gpu_model,
                               std::shared_ptr<const WorkerStats> stats, std::shared_ptr<const Nvml> nvml) {
  devices_->add(Device{device, gpu_model, std::move(stats), std::move(nvml)});
}

Status WorkerMetrics::serve(const std::string& bind_address) {
  if (bind_address.empty()) return {};
  try {
    exposer_ = std::make_unique<Exposer>(bind_address);
    exposer_->RegisterCollectable(devices_);
  } catch (const std::exception& e) {
    exposer_.reset();
    return Status::unavailable("cannot serve /metrics on " + bind_address + ": " + e.what() +
                               "; pick another --metrics address");
  }
  return {};
}

int WorkerMetrics::port() const {
  if (!exposer_) return 0;
  auto ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

std::vector<MetricFamily> WorkerMetrics::collect() const { return devices_->Collect(); }

}  // namespace ak
