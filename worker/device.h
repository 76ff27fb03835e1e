// Device discovery: what this machine can offer the farm, as Capabilities for READY.
//
// detect_gpus() reads every CUDA device through the driver API loaded at run time
// (worker/cuda_driver.h); it creates no context, so it is cheap and leaves the GPUs free for the
// sandbox. On a machine without the NVIDIA driver, or with a driver but no device, it returns
// kUnavailable with a message that says so; callers then offer the CPU backend
// (cpu_capabilities()). All functions are thread-safe.
#pragma once

#include <string>
#include <vector>

#include "common/job.h"
#include "common/status.h"
#include "worker/cuda_driver.h"

namespace ak {

// One Capabilities per CUDA device, in ordinal order (device_index = ordinal), backends {kCuda, kTriton};
// shared_memory_per_block_bytes is the device's opt-in limit per block (0 where the driver does not say).
// Fails with kUnavailable when libcuda.so.1 cannot be loaded or reports no device.
Result<std::vector<Capabilities>> detect_gpus();
// The same against a given driver table (tests pass a fake one).
Result<std::vector<Capabilities>> detect_gpus(const CudaDriver& driver);

// This host as a CPU worker: gpu_name "cpu", arch from uname (e.g. "x86_64"), backends {kCpu},
// memory_bytes = physical memory, sm_count = online CPU cores, shared_memory_per_block_bytes = the
// per-core L2 cache (0 where unknown), device_index -1.
Capabilities cpu_capabilities();

// The architecture we compile for: "sm_90a" for 9.0 and "sm_100a" for 10.0 (the arch-specific
// feature sets: wgmma, tcgen05), otherwise "sm_<major><minor>" (8.6 -> "sm_86").
std::string arch_for_compute_capability(int major, int minor);

// "10de:2335" (vendor:device, lower-case hex) for a PCI bus id as cuDeviceGetPCIBusId writes it
// ("0000:19:00.0"), read from sysfs; "" when sysfs does not have it.
std::string pci_device_id(const std::string& bus_id);

// gethostname(), or "localhost" if that fails.
std::string local_hostname();

}  // namespace ak
