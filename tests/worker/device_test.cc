#include "worker/device.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "worker/cuda_driver.h"

namespace ak {
namespace {

bool driver_present() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h) dlclose(h);
  return h != nullptr;
}

// A driver table with two devices: an H200-like 9.0 part and an 8.6 part.
struct FakeGpu {
  const char* name;
  const char* bus;
  int major, minor, sms;
  size_t bytes;
  int smem;  // opt-in shared memory per block [bytes]; 0: the driver does not answer
};
FakeGpu g_gpus[] = {{"NVIDIA H200", "0000:19:00.0", 9, 0, 132, size_t{150} << 30, 227 * 1024},
                    {"NVIDIA GeForce RTX 3090", "0000:3B:00.0", 8, 6, 82, size_t{24} << 30, 0}};
int g_count = 2;

CudaDriver fake_driver() {
  CudaDriver d{};
  d.cuDeviceGetCount = [](int* n) { *n = g_count; return CUDA_SUCCESS; };
  d.cuDeviceGet = [](CUdevice* dev, int i) { *dev = i; return CUDA_SUCCESS; };
  d.cuDeviceGetName = [](char* buf, int len, CUdevice dev) {
    std::strncpy(buf, g_gpus[dev].name, static_cast<size_t>(len));
    return CUDA_SUCCESS;
  };
  d.cuDeviceGetPCIBusId = [](char* buf, int len, CUdevice dev) {
    std::strncpy(buf, g_gpus[dev].bus, static_cast<size_t>(len));
    return CUDA_SUCCESS;
  };
  d.cuDeviceGetAttribute = [](int* v, CUdevice_attribute a, CUdevice dev) {
    if (a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) *v = g_gpus[dev].major;
    else if (a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR) *v = g_gpus[dev].minor;
    else if (a == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) *v = g_gpus[dev].sms;
    else if (a == CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN && g_gpus[dev].smem)
      *v = g_gpus[dev].smem;
    else return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
  };
  d.cuDeviceTotalMem = [](size_t* b, CUdevice dev) { *b = g_gpus[dev].bytes; return CUDA_SUCCESS; };
  d.cuGetErrorName = [](CUresult, const char** s) { *s = "CUDA_ERROR_FAKE"; return CUDA_SUCCESS; };
  d.cuGetErrorString = [](CUresult, const char** s) { *s = "fake failure"; return CUDA_SUCCESS; };
  return d;
}

TEST(ArchForComputeCapability, UsesArchSpecificTargetsForHopperAndBlackwell) {
  EXPECT_EQ(arch_for_compute_capability(9, 0), "sm_90a");
  EXPECT_EQ(arch_for_compute_capability(10, 0), "sm_100a");
  EXPECT_EQ(arch_for_compute_capability(8, 6), "sm_86");
  EXPECT_EQ(arch_for_compute_capability(8, 0), "sm_80");
  EXPECT_EQ(arch_for_compute_capability(12, 0), "sm_120");
}

TEST(DetectGpus, FillsCapabilitiesOfEveryDeviceFromTheDriver) {
  g_count = 2;
  auto gpus = detect_gpus(fake_driver());
  ASSERT_TRUE(gpus.ok()) << gpus.status().to_string();
  ASSERT_EQ(gpus->size(), 2u);
  const Capabilities& h200 = (*gpus)[0];
  EXPECT_EQ(h200.gpu_name, "NVIDIA H200");
  EXPECT_EQ(h200.pci_id, "0000:19:00.0");
  EXPECT_EQ(h200.compute_capability, "9.0");
  EXPECT_EQ(h200.arch, "sm_90a");
  EXPECT_EQ(h200.sm_count, 132);
  EXPECT_EQ(h200.memory_bytes, int64_t{150} << 30);
  EXPECT_EQ(h200.device_index, 0);
  EXPECT_EQ(h200.backends, (std::vector<Backend>{Backend::kCuda, Backend::kTriton}));
  EXPECT_FALSE(h200.hostname.empty());
  EXPECT_EQ((*gpus)[1].arch, "sm_86");
  EXPECT_EQ((*gpus)[1].device_index, 1);
}

TEST(DetectGpus, AnnouncesTheOptInSharedMemoryLimitAndZeroWhereTheDriverDoesNotSay) {
  g_count = 2;
  auto gpus = detect_gpus(fake_driver());
  ASSERT_TRUE(gpus.ok()) << gpus.status().to_string();
  EXPECT_EQ((*gpus)[0].shared_memory_per_block_bytes, 227 * 1024);
  EXPECT_EQ((*gpus)[1].shared_memory_per_block_bytes, 0);
}

TEST(DetectGpus, DriverWithNoDeviceIsUnavailableAndSaysUseCpu) {
  g_count = 0;
  auto gpus = detect_gpus(fake_driver());
  g_count = 2;
  ASSERT_FALSE(gpus.ok());
  EXPECT_EQ(gpus.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(gpus.status().message().find("cpu"), std::string::npos) << gpus.status().message();
}

TEST(DetectGpus, WithoutDriverReturnsClearError) {
  if (driver_present()) GTEST_SKIP() << "libcuda.so.1 is present on this machine";
  auto gpus = detect_gpus();
  ASSERT_FALSE(gpus.ok());
  EXPECT_EQ(gpus.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(gpus.status().message().find("libcuda.so.1"), std::string::npos) << gpus.status().message();
  EXPECT_NE(gpus.status().message().find("cpu backend"), std::string::npos) << gpus.status().message();
}

TEST(CpuCapabilities, DescribeThisHostAsACpuWorker) {
  Capabilities c = cpu_capabilities();
  EXPECT_EQ(c.gpu_name, "cpu");
  EXPECT_EQ(c.backends, std::vector<Backend>{Backend::kCpu});
  EXPECT_EQ(c.device_index, -1);
  EXPECT_FALSE(c.arch.empty());
  EXPECT_FALSE(c.hostname.empty());
  EXPECT_GT(c.memory_bytes, 0);
  EXPECT_GE(c.sm_count, 1);
  EXPECT_GE(c.shared_memory_per_block_bytes, 0);
  EXPECT_TRUE(c.pci_id.empty());
}

}  // namespace
}  // namespace ak
