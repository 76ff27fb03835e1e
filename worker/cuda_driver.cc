#include "worker/cuda_driver.h"

#include <dlfcn.h>

#include <mutex>

namespace ak {

std::string CudaDriver::error_text(CUresult r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName) cuGetErrorName(r, &name);
  if (cuGetErrorString) cuGetErrorString(r, &text);
  return std::string(name ? name : "CUDA_ERROR_?") + " (" + (text ? text : "no description") + ")";
}

Status grant_dynamic_shared(const CudaDriver& drv, CUfunction fn, unsigned bytes, int max_shared, unsigned& granted) {
  if (bytes <= granted) return Status::ok_status();
  int static_bytes = 0;
  if (drv.cuFuncGetAttribute(&static_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn) != CUDA_SUCCESS) static_bytes = 0;
  if (int64_t(bytes) + static_bytes > max_shared)
    return Status::invalid("the launch asks for more shared memory than the device grants a block (" +
                           std::to_string(max_shared) + " B): " + std::to_string(bytes) + " B dynamic beside " +
                           std::to_string(static_bytes) + " B static");
  const CUresult r = drv.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(bytes));
  if (r != CUDA_SUCCESS)
    return Status::internal("cannot grant " + std::to_string(bytes) + " B of dynamic shared memory beside " +
                            std::to_string(static_bytes) + " B static: " + drv.error_text(r));
  granted = bytes;
  return Status::ok_status();
}

Result<std::shared_ptr<const CudaDriver>> CudaDriver::load() {
  static std::mutex mu;
  static std::shared_ptr<const CudaDriver> cached;
  static Status cached_error;
  static bool tried = false;
  std::lock_guard<std::mutex> lock(mu);
  if (tried) {
    if (cached) return cached;
    return cached_error;
  }
  tried = true;
#ifdef AK_NO_CUDA
  cached_error = Status::unavailable(kNoCudaBackend);
  return cached_error;
#endif
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    cached_error = Status::unavailable(std::string("libcuda.so.1 not found (") + dlerror() +
                                       "): no NVIDIA driver on this machine; use the cpu backend");
    return cached_error;
  }
  auto d = std::make_shared<CudaDriver>();
  bool missing = false;
  std::string missing_name;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
    if (!fn && !missing) {
      missing = true;
      missing_name = name;
    }
  };
  sym(d->cuInit, "cuInit");
  sym(d->cuDriverGetVersion, "cuDriverGetVersion");
  sym(d->cuDeviceGetCount, "cuDeviceGetCount");
  sym(d->cuDeviceGet, "cuDeviceGet");
  sym(d->cuDeviceGetName, "cuDeviceGetName");
  sym(d->cuDeviceGetAttribute, "cuDeviceGetAttribute");
  sym(d->cuDeviceTotalMem, "cuDeviceTotalMem_v2");
  sym(d->cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId");
  sym(d->cuCtxGetCurrent, "cuCtxGetCurrent");
  sym(d->cuCtxSynchronize, "cuCtxSynchronize");
  sym(d->cuModuleLoadData, "cuModuleLoadData");
  sym(d->cuModuleUnload, "cuModuleUnload");
  sym(d->cuModuleGetFunction, "cuModuleGetFunction");
  sym(d->cuFuncSetAttribute, "cuFuncSetAttribute");
  sym(d->cuFuncGetAttribute, "cuFuncGetAttribute");
  sym(d->cuLaunchKernel, "cuLaunchKernel");
  sym(d->cuEventCreate, "cuEventCreate");
  sym(d->cuEventDestroy, "cuEventDestroy_v2");
  sym(d->cuEventRecord, "cuEventRecord");
  sym(d->cuEventSynchronize, "cuEventSynchronize");
  sym(d->cuEventElapsedTime, "cuEventElapsedTime_v2");
  sym(d->cuStreamSynchronize, "cuStreamSynchronize");
  sym(d->cuStreamIsCapturing, "cuStreamIsCapturing");
  sym(d->cuMemHostAlloc, "cuMemHostAlloc");
  sym(d->cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2");
  sym(d->cuMemFreeHost, "cuMemFreeHost");
  sym(d->cuMemGetInfo, "cuMemGetInfo_v2");
  sym(d->cuModuleGetGlobal, "cuModuleGetGlobal_v2");
  sym(d->cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
  d->cuTensorMapEncodeTiled = reinterpret_cast<decltype(d->cuTensorMapEncodeTiled)>(dlsym(h, "cuTensorMapEncodeTiled"));
  sym(d->cuGetErrorName, "cuGetErrorName");
  sym(d->cuGetErrorString, "cuGetErrorString");
  if (missing) {
    cached_error = Status::unavailable("libcuda.so.1 lacks " + missing_name + "; the driver is too old for CUDA 13");
    return cached_error;
  }
  CUresult r = d->cuInit(0);
  if (r != CUDA_SUCCESS) {
    cached_error = Status::unavailable("cuInit failed: " + d->error_text(r) + "; no usable GPU, use the cpu backend");
    return cached_error;
  }
  cached = d;
  return cached;
}

}  // namespace ak
