#include "worker/nvml.h"

#include <dlfcn.h>

#include <utility>
#include <vector>

namespace ak {

// The few NVML entry points we use, with NVML's C signatures (nvml.h is not needed: every
// parameter is a pointer, an unsigned or an enum passed as int).
struct Nvml::Api {
  void* lib = nullptr;
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*by_pci)(const char*, void**) = nullptr;
  int (*clock)(void*, int, unsigned*) = nullptr;
  int (*power)(void*, unsigned*) = nullptr;
  int (*temperature)(void*, int, unsigned*) = nullptr;
  int (*reasons)(void*, unsigned long long*) = nullptr;
  const char* (*error_string)(int) = nullptr;
  int (*driver_version)(char*, unsigned) = nullptr;
  int (*utilization)(void*, unsigned*) = nullptr;  // nvmlUtilization_t is {unsigned gpu, memory}
};

namespace {
constexpr int kClockSm = 1;    // NVML_CLOCK_SM
constexpr int kClockMem = 2;   // NVML_CLOCK_MEM
constexpr int kTempGpu = 0;    // NVML_TEMPERATURE_GPU
}  // namespace

std::string reason_names(uint64_t reasons) {
  static const std::vector<std::pair<uint64_t, const char*>> names = {
      {kReasonGpuIdle, "gpu_idle"},       {kReasonApplicationsClocks, "applications_clocks"},
      {kReasonSwPowerCap, "sw_power_cap"}, {kReasonHwSlowdown, "hw_slowdown"},
      {kReasonSyncBoost, "sync_boost"},   {kReasonSwThermal, "sw_thermal"},
      {kReasonHwThermal, "hw_thermal"},   {kReasonHwPowerBrake, "hw_power_brake"},
      {kReasonDisplayClocks, "display_clocks"}};
  if (reasons == 0) return "none";
  std::string s;
  uint64_t known = 0;
  for (const auto& [bit, name] : names) {
    known |= bit;
    if (reasons & bit) s += (s.empty() ? "" : "|") + std::string(name);
  }
  if (reasons & ~known) s += (s.empty() ? "" : "|") + std::string("other");
  return s;
}

Result<std::shared_ptr<const Nvml>> Nvml::open(const std::string& pci_bus_id) {
  auto api = std::make_unique<Api>();
  api->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!api->lib) return Status::unavailable("libnvidia-ml.so.1 not found: no NVML telemetry");
  auto sym = [&](const char* name) { return dlsym(api->lib, name); };
  api->init = reinterpret_cast<int (*)()>(sym("nvmlInit_v2"));
  api->shutdown = reinterpret_cast<int (*)()>(sym("nvmlShutdown"));
  api->by_pci = reinterpret_cast<int (*)(const char*, void**)>(sym("nvmlDeviceGetHandleByPciBusId_v2"));
  api->clock = reinterpret_cast<int (*)(void*, int, unsigned*)>(sym("nvmlDeviceGetClockInfo"));
  api->power = reinterpret_cast<int (*)(void*, unsigned*)>(sym("nvmlDeviceGetPowerUsage"));
  api->temperature = reinterpret_cast<int (*)(void*, int, unsigned*)>(sym("nvmlDeviceGetTemperature"));
  // The newer name first; both have the same signature and meaning.
  api->reasons = reinterpret_cast<int (*)(void*, unsigned long long*)>(sym("nvmlDeviceGetCurrentClocksEventReasons"));
  if (!api->reasons)
    api->reasons =
        reinterpret_cast<int (*)(void*, unsigned long long*)>(sym("nvmlDeviceGetCurrentClocksThrottleReasons"));
  api->error_string = reinterpret_cast<const char* (*)(int)>(sym("nvmlErrorString"));
  api->driver_version = reinterpret_cast<int (*)(char*, unsigned)>(sym("nvmlSystemGetDriverVersion"));
  api->utilization = reinterpret_cast<int (*)(void*, unsigned*)>(sym("nvmlDeviceGetUtilizationRates"));
  if (!api->init || !api->shutdown || !api->by_pci || !api->clock || !api->power || !api->temperature ||
      !api->reasons) {
    dlclose(api->lib);
    return Status::unavailable("libnvidia-ml.so.1 lacks an entry point the farm needs (driver too old?)");
  }
  auto text = [&](int rc) {
    return std::to_string(rc) + (api->error_string ? std::string(" (") + api->error_string(rc) + ")" : "");
  };
  if (int rc = api->init(); rc != 0) {
    dlclose(api->lib);
    return Status::unavailable("nvmlInit_v2 failed: " + text(rc));
  }
  std::shared_ptr<Nvml> n(new Nvml());
  n->api_ = std::move(api);
  if (int rc = n->api_->by_pci(pci_bus_id.c_str(), &n->device_); rc != 0)
    return Status::unavailable("NVML has no device at PCI bus id '" + pci_bus_id + "': " + text(rc));
  return std::shared_ptr<const Nvml>(std::move(n));
}

Nvml::~Nvml() {
  if (api_ && api_->lib) {
    api_->shutdown();
    dlclose(api_->lib);
  }
}

std::string Nvml::driver_version() const {
  char buf[96] = {};
  if (!api_ || !api_->driver_version || api_->driver_version(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

std::optional<double> Nvml::busy_fraction() const {
  if (!api_ || !device_ || !api_->utilization) return std::nullopt;
  unsigned rates[2] = {0, 0};  // gpu, memory [%]
  if (api_->utilization(device_, rates) != 0) return std::nullopt;
  return rates[0] / 100.0;
}

Telemetry Nvml::read() const {
  Telemetry t;
  if (!api_ || !device_) return t;
  unsigned sm = 0, mem = 0, mw = 0, temp = 0;
  unsigned long long reasons = 0;
  if (api_->clock(device_, kClockSm, &sm) != 0 || api_->clock(device_, kClockMem, &mem) != 0 ||
      api_->power(device_, &mw) != 0 || api_->temperature(device_, kTempGpu, &temp) != 0 ||
      api_->reasons(device_, &reasons) != 0)
    return t;
  t.valid = true;
  t.sm_clock_mhz = sm;
  t.mem_clock_mhz = mem;
  t.power_w = double(mw) / 1000.0;
  t.temperature_c = temp;
  t.reasons = reasons;
  return t;
}

}  // namespace ak
