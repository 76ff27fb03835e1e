// The CUDA driver API's declarations that worker/cuda_driver.h needs, for a build without the CUDA
// toolkit (cmake -DAK_WITH_CUDA=OFF, which defines AK_NO_CUDA; issue 21, "Install anywhere").
//
// Such a build compiles the same sources but cannot reach a GPU: CudaDriver::load() fails with
// "this build has no CUDA backend ...", so detect_gpus() finds none, a worker offers only the cpu
// backend, and the compiler refuses cuda and triton jobs. Only types and the constants this code
// uses are declared, with the values of the toolkit's cuda.h (13.0); nothing here is ever passed
// to a driver, because no driver is ever loaded.
#pragma once

#ifndef AK_NO_CUDA
#error "worker/cuda_types.h is for builds without the CUDA toolkit; include <cuda.h>"
#endif

using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUevent = struct CUevent_st*;
using CUstream = struct CUstream_st*;

enum CUresult { CUDA_SUCCESS = 0, CUDA_ERROR_ILLEGAL_ADDRESS = 700 };
enum CUdevice_attribute {
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
};
enum CUfunction_attribute {
  CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
  CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
};
enum CUevent_flags { CU_EVENT_DEFAULT = 0 };
enum CUstreamCaptureStatus { CU_STREAM_CAPTURE_STATUS_NONE = 0, CU_STREAM_CAPTURE_STATUS_ACTIVE = 1 };
#define CU_MEMHOSTALLOC_PORTABLE 0x01
#define CU_MEMHOSTALLOC_DEVICEMAP 0x02
