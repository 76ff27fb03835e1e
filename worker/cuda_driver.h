// CudaDriver: the CUDA driver API loaded at run time from libcuda.so.1.
//
// The binaries must start on machines with no NVIDIA driver, so nothing links libcuda; load()
// dlopens it and resolves the entry points below. On a machine without the driver load() returns
// kUnavailable ("libcuda.so.1 not found: no NVIDIA driver on this machine; use --backend cpu").
// The returned object is immutable and safe to share between threads (the driver API itself is
// thread-safe). Types come from the toolkit's cuda.h; no symbol of it is linked.
#pragma once

#ifdef AK_NO_CUDA
#include "worker/cuda_types.h"
#else
#include <cuda.h>
#endif

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace ak {

// Why a build without the CUDA toolkit (AK_NO_CUDA, worker/cuda_types.h) cannot run cuda or triton
// jobs: what CudaDriver::load(), the compiler and the sandbox say there.
inline constexpr const char* kNoCudaBackend =
    "this build has no CUDA backend (configured with -DAK_WITH_CUDA=OFF or without the CUDA toolkit); use the cpu "
    "backend, or rebuild with the CUDA toolkit for the cuda and triton backends";

struct CudaDriver {
  CUresult (*cuInit)(unsigned int);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, CUdevice_attribute, CUdevice);
  CUresult (*cuDeviceTotalMem)(size_t*, CUdevice);
  CUresult (*cuDeviceGetPCIBusId)(char*, int, CUdevice);
  CUresult (*cuCtxGetCurrent)(CUcontext*);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);  // a cubin, or PTX text (compiled by the driver)
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuFuncSetAttribute)(CUfunction, CUfunction_attribute, int);
  CUresult (*cuFuncGetAttribute)(int*, CUfunction_attribute, CUfunction);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**);
  CUresult (*cuEventCreate)(CUevent*, unsigned int);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuStreamIsCapturing)(CUstream, CUstreamCaptureStatus*);
  CUresult (*cuMemHostAlloc)(void**, size_t, unsigned int);
  CUresult (*cuMemHostGetDevicePointer)(CUdeviceptr*, void*, unsigned int);
  CUresult (*cuMemFreeHost)(void*);
  CUresult (*cuMemGetInfo)(size_t*, size_t*);
  CUresult (*cuModuleGetGlobal)(CUdeviceptr*, size_t*, CUmodule, const char*);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);
  // Optional (nullptr on a driver without it): TMA tensor maps (kernels/registry.h,
  // TensorMapSpec). The enum parameters (data type, interleave, swizzle, L2 promotion, out-of-bounds
  // fill) are passed as their int values from cuda.h.
  CUresult (*cuTensorMapEncodeTiled)(void* map, int data_type, unsigned rank, void* address, const uint64_t* dims,
                                     const uint64_t* strides, const uint32_t* box, const uint32_t* element_strides,
                                     int interleave, int swizzle, int l2_promotion, int oob_fill);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuGetErrorString)(CUresult, const char**);

  // "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)"
  std::string error_text(CUresult r) const;

  // Loads libcuda.so.1 and calls cuInit(0). Repeated calls return the same object. In a build
  // without CUDA: kUnavailable with kNoCudaBackend.
  static Result<std::shared_ptr<const CudaDriver>> load();
};

// Grants a launch of `fn` `bytes` of dynamic shared memory: checks them, with the function's static
// shared memory beside them, against `max_shared` (the device's opt-in limit per block) and raises
// the function's dynamic limit to `bytes` when they are more than `granted`, the limit set so far
// (0 before the first). Without that call the limit is 48 KiB less the static part, so even a
// launch of 48 KiB or less needs it when the kernel also has static shared memory (a TMA matmul
// with 1 KiB of barriers and 48 KiB of stages failed with CUDA_ERROR_INVALID_VALUE).
Status grant_dynamic_shared(const CudaDriver& drv, CUfunction fn, unsigned bytes, int max_shared, unsigned& granted);

// Checks a driver call; on failure returns a Status naming the call, file:line and the error.
#define AK_CU_CHECK(drv, call)                                                               \
  do {                                                                                       \
    CUresult ak_cu_r_ = (drv).call;                                                          \
    if (ak_cu_r_ != CUDA_SUCCESS)                                                            \
      return ::ak::Status::internal(std::string(#call) + " failed at " __FILE__ ":" +        \
                                    std::to_string(__LINE__) + ": " + (drv).error_text(ak_cu_r_)); \
  } while (0)

}  // namespace ak
