// Device telemetry through NVML, loaded at run time from libnvidia-ml.so.1 (nothing links it, so
// the binaries start on machines without a driver). Used by the sandbox around every measurement
// (worker/sandbox/harness.cc): clocks, power, temperature and the clock-event ("throttle")
// reasons, so that a measurement taken while the GPU slowed itself down is marked.
//
// Nvml is immutable after open() and may be shared between threads (NVML is thread-safe).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/status.h"

namespace ak {

struct Telemetry {
  bool valid = false;          // false: NVML unavailable or the query failed
  unsigned sm_clock_mhz = 0;
  unsigned mem_clock_mhz = 0;
  double power_w = 0;
  unsigned temperature_c = 0;
  uint64_t reasons = 0;        // nvmlClocksEventReasons bit mask
};

// Bits of the reason mask (NVML's nvmlClocksEventReason* / nvmlClocksThrottleReason* values).
inline constexpr uint64_t kReasonGpuIdle = 0x1;
inline constexpr uint64_t kReasonApplicationsClocks = 0x2;
inline constexpr uint64_t kReasonSwPowerCap = 0x4;
inline constexpr uint64_t kReasonHwSlowdown = 0x8;
inline constexpr uint64_t kReasonSyncBoost = 0x10;
inline constexpr uint64_t kReasonSwThermal = 0x20;
inline constexpr uint64_t kReasonHwThermal = 0x40;
inline constexpr uint64_t kReasonHwPowerBrake = 0x80;
inline constexpr uint64_t kReasonDisplayClocks = 0x100;
// The reasons that mean the GPU ran below the clocks it would otherwise have had: power cap,
// thermal and hardware slowdowns. Idle, application clocks, sync boost and display clocks do not.
inline constexpr uint64_t kThrottleMask =
    kReasonSwPowerCap | kReasonHwSlowdown | kReasonSwThermal | kReasonHwThermal | kReasonHwPowerBrake;

// "sw_power_cap|hw_thermal", "none" for 0.
std::string reason_names(uint64_t reasons);

class Nvml {
 public:
  // Loads NVML, initialises it and finds the device by PCI bus id ("0000:19:00.0", as
  // cuDeviceGetPCIBusId writes it). kUnavailable with the reason when any step fails.
  static Result<std::shared_ptr<const Nvml>> open(const std::string& pci_bus_id);
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  Telemetry read() const;  // never throws; valid=false when a query fails
  // Share of the last sample period (1/6 s to 1 s, by device) in which a kernel ran on the GPU,
  // 0..1 (nvmlDeviceGetUtilizationRates); nullopt when NVML does not say. Never throws.
  std::optional<double> busy_fraction() const;
  // The NVIDIA driver's version ("580.159.04"); empty when NVML does not say.
  std::string driver_version() const;

 private:
  Nvml() = default;
  struct Api;
  std::unique_ptr<Api> api_;
  void* device_ = nullptr;
};

}  // namespace ak
