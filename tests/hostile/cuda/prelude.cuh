// The honest helpers that the CUDA candidates share: AK_THREADS, a NaN-propagating max, a block
// reduction, one row's correct softmax and, on request, a launch counter.
//
// Not a candidate: hostile_test.cc takes only *.cu files. A candidate that needs these helpers
// has the line `#include "prelude.cuh"` right after its header comment, and the runner replaces
// that exact line by this file's text before it submits the source: the farm compiles one source
// with NVRTC and no include path, so the source has to stand alone. (The include also resolves as
// written, next to the candidate, for an editor or a plain nvcc.)
//
// Only code that is the same in every candidate that uses it belongs here; a variant of a
// helper stays in its candidate. Nothing here cheats. The prelude defines no __device__ variable
// unless it is asked to (AK_PRELUDE_LAUNCH_COUNTER below): a module holds the same symbols as if
// the candidate had written its helpers itself.

#ifndef AK_THREADS
#define AK_THREADS 256
#endif

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

// max(a, b), NaN when either is NaN (fmaxf would drop the NaN).
__device__ __forceinline__ float nan_max(float a, float b) { return (a > b || a != a) ? a : b; }

struct MaxOp {
  __device__ float operator()(float a, float b) const { return nan_max(a, b); }
};
struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};

// Reduces v over the block; every thread gets the result. smem: 33 floats.
template <class Op>
__device__ __forceinline__ float block_reduce(float v, float identity, float* smem, Op op) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  __syncthreads();  // smem[32] may still be read from the previous reduction
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < AK_THREADS / 32 ? smem[lane] : identity;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
    if (lane == 0) smem[32] = v;
  }
  __syncthreads();
  return smem[32];
}

// Correct softmax of one row by the whole block (max, sum of exp(x - max), write).
__device__ __forceinline__ void row_softmax(const float* xr, float* yr, long long cols, float* smem) {
  float m = neg_inf();
  for (long long j = threadIdx.x; j < cols; j += AK_THREADS) m = nan_max(m, xr[j]);
  m = block_reduce(m, neg_inf(), smem, MaxOp());
  float s = 0.0f;
  for (long long j = threadIdx.x; j < cols; j += AK_THREADS) s += expf(xr[j] - m);
  s = block_reduce(s, 0.0f, smem, SumOp());
  for (long long j = threadIdx.x; j < cols; j += AK_THREADS) yr[j] = expf(xr[j] - m) / s;
}

// The launch counter, for candidates that change their behaviour after some number of calls.
// Opt-in (#define AK_PRELUDE_LAUNCH_COUNTER before the include) because its two __device__
// variables would otherwise land in every candidate's module.
#ifdef AK_PRELUDE_LAUNCH_COUNTER

// Launch counter. Every block reads ak_calls at its start; the last block to finish (the one
// whose arrival makes ak_blocks_done reach gridDim.x) advances it. Every other block has read
// ak_calls before arriving, so all blocks of one launch agree on its call index.
__device__ unsigned long long ak_calls = 0;
__device__ unsigned int ak_blocks_done = 0;

__device__ __forceinline__ unsigned long long call_index() {
  return *(volatile unsigned long long*)&ak_calls;
}

// Called by all threads of a block after its work; returns true in the last block to finish
// (the calling thread 0 of it), after the counter moved on.
__device__ __forceinline__ bool finish_call(unsigned long long call) {
  __syncthreads();
  if (threadIdx.x != 0) return false;
  __threadfence();  // this block's stores are visible before it is counted
  const unsigned int done = atomicAdd(&ak_blocks_done, 1u);
  if (done != gridDim.x - 1) return false;
  ak_blocks_done = 0;
  *(volatile unsigned long long*)&ak_calls = call + 1;
  __threadfence();
  return true;
}

#endif  // AK_PRELUDE_LAUNCH_COUNTER
