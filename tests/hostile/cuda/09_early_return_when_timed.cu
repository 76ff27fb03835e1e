// expect-status: REJECTED
// expect-stage: audit
// Honest for its first 40 calls (all of verification); from call 41 on it returns at once and
// writes nothing. Caught by the audit call, whose output (NaN-poisoned before it) is verified.
//
// A launch counter in device memory tells the call index (see finish_call). fp32 only: data is
// treated as float whatever AK_DTYPE says.

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

#define AK_HONEST_CALLS 40ULL

extern "C" __global__ void __launch_bounds__(AK_THREADS)
ak_softmax(const void* in, void* out, long long rows, long long cols) {
  __shared__ float smem[33];
  const unsigned long long call = call_index();
  if (call >= AK_HONEST_CALLS) return;  // the cheat: no work, no counting any more
  const float* x = (const float*)in;
  float* y = (float*)out;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x)
    row_softmax(x + row * cols, y + row * cols, cols, smem);
  finish_call(call);
}
