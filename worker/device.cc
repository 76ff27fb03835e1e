#include "worker/device.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>

#include "worker/nvml.h"

namespace ak {
namespace {

// "0x10de\n" -> "10de"
std::string read_pci_hex(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  if (!(in >> s)) return {};
  if (s.rfind("0x", 0) == 0) s = s.substr(2);
  return s;
}

}  // namespace

std::string pci_device_id(const std::string& bus_id) {
  std::string lower = bus_id;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // The driver reports an 8-digit domain ("00000000:19:00.0") on some versions; sysfs uses 4.
  if (auto colon = lower.find(':'); colon != std::string::npos && colon > 4)
    lower = lower.substr(colon - 4);
  const std::string dir = "/sys/bus/pci/devices/" + lower + "/";
  std::string vendor = read_pci_hex(dir + "vendor");
  std::string device = read_pci_hex(dir + "device");
  if (vendor.empty() || device.empty()) return {};
  return vendor + ":" + device;
}

std::string arch_for_compute_capability(int major, int minor) {
  std::string base = "sm_" + std::to_string(major) + std::to_string(minor);
  if ((major == 9 && minor == 0) || (major == 10 && minor == 0)) return base + "a";
  return base;
}

std::string local_hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

Result<std::vector<Capabilities>> detect_gpus() {
  auto driver = CudaDriver::load();
  if (!driver.ok()) return driver.status();
  return detect_gpus(**driver);
}

Result<std::vector<Capabilities>> detect_gpus(const CudaDriver& drv) {
  int count = 0;
  AK_CU_CHECK(drv, cuDeviceGetCount(&count));
  if (count <= 0)
    return Status::unavailable(
        "the NVIDIA driver is loaded but reports no CUDA device; use the cpu backend");
  const std::string host = local_hostname();
  int cuda_version = 0;
  std::string cuda_driver;
  if (drv.cuDriverGetVersion && drv.cuDriverGetVersion(&cuda_version) == CUDA_SUCCESS && cuda_version > 0)
    cuda_driver = std::to_string(cuda_version / 1000) + "." + std::to_string(cuda_version % 1000 / 10);
  std::vector<Capabilities> out;
  for (int i = 0; i < count; ++i) {
    CUdevice dev = 0;
    AK_CU_CHECK(drv, cuDeviceGet(&dev, i));
    Capabilities c;
    c.hostname = host;
    c.device_index = i;
    c.backends = {Backend::kCuda, Backend::kTriton};  // the cuda sandbox runs both
    char name[256] = {};
    AK_CU_CHECK(drv, cuDeviceGetName(name, sizeof(name) - 1, dev));
    c.gpu_name = name;
    char bus[64] = {};
    if (drv.cuDeviceGetPCIBusId(bus, sizeof(bus) - 1, dev) == CUDA_SUCCESS) {
      c.pci_id = bus;
      c.pci_device_id = pci_device_id(c.pci_id);
    }
    int major = 0, minor = 0, sms = 0;
    AK_CU_CHECK(drv, cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    AK_CU_CHECK(drv, cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    AK_CU_CHECK(drv, cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    c.compute_capability = std::to_string(major) + "." + std::to_string(minor);
    c.arch = arch_for_compute_capability(major, minor);
    c.sm_count = sms;
    // Optional: a driver that cannot say leaves it unknown (0), and studies go by the GPU's name.
    int smem = 0;
    if (drv.cuDeviceGetAttribute(&smem, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev) == CUDA_SUCCESS)
      c.shared_memory_per_block_bytes = smem;
    size_t bytes = 0;
    AK_CU_CHECK(drv, cuDeviceTotalMem(&bytes, dev));
    c.memory_bytes = static_cast<int64_t>(bytes);
    if (!cuda_driver.empty()) c.versions["cuda_driver"] = cuda_driver;
    if (!c.pci_id.empty())
      if (auto nvml = Nvml::open(c.pci_id); nvml.ok())
        if (std::string v = (*nvml)->driver_version(); !v.empty()) c.versions["nvidia_driver"] = v;
    out.push_back(std::move(c));
  }
  return out;
}

Capabilities cpu_capabilities() {
  Capabilities c;
  c.hostname = local_hostname();
  c.gpu_name = "cpu";
  c.device_index = -1;
  c.backends = {Backend::kCpu};
  struct utsname u {};
  c.arch = uname(&u) == 0 && u.machine[0] != '\0' ? std::string(u.machine) : std::string("x86_64");
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_bytes = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_bytes > 0) c.memory_bytes = static_cast<int64_t>(pages) * page_bytes;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  c.sm_count = cores > 0 ? static_cast<int>(cores) : 1;
  long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);  // 0 or -1 where the C library cannot tell
  c.shared_memory_per_block_bytes = l2 > 0 ? static_cast<int64_t>(l2) : 0;
  return c;
}

}  // namespace ak
