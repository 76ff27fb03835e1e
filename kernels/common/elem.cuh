// Element type of a kernel type's CUDA sources, from -DAK_DTYPE (0 fp32, 1 fp16, 2 bf16):
// elem_t and its fp32 conversions by PTX cvt instructions (NVRTC has no cuda_fp16.h without the
// toolkit's include path). The kernel sources include it with a quoted #include, which
// kernels/embed.cmake replaces by this text, so every starter a candidate starts from is one
// self-contained source.
#ifndef AK_DTYPE
#define AK_DTYPE 0
#endif

#if AK_DTYPE == 0
typedef float elem_t;
__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float from_f32(float v) { return v; }
#elif AK_DTYPE == 1
typedef unsigned short elem_t;
__device__ __forceinline__ float to_f32(unsigned short v) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v));
  return f;
}
__device__ __forceinline__ unsigned short from_f32(float v) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
  return h;
}
#elif AK_DTYPE == 2
typedef unsigned short elem_t;
__device__ __forceinline__ float to_f32(unsigned short v) { return __uint_as_float(((unsigned)v) << 16); }
__device__ __forceinline__ unsigned short from_f32(float v) {
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v));
  return h;
}
#else
#error "AK_DTYPE must be 0 (fp32), 1 (fp16) or 2 (bf16)"
#endif
