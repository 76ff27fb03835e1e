// expect-status: FAIL
// expect-stage: verify.hostile
// Softmax without max subtraction, exp(x) / sum(exp(x)): fine on realistic logits, but near the
// dtype max expf overflows to inf and inf / inf is NaN. Caught by the near_max hostile input.
//
// Realistic logits stay below |x| ~ 60, far from expf's overflow at 88.7, so smoke and sweep
// pass. fp32 only: the data is read and written as float whatever AK_DTYPE says.

#ifndef AK_THREADS
#define AK_THREADS 256
#endif

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

extern "C" __global__ void __launch_bounds__(AK_THREADS)
ak_softmax(const void* in, void* out, long long rows, long long cols) {
  __shared__ float smem[33];
  const float* x = (const float*)in;
  float* y = (float*)out;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * cols;
    float* yr = y + row * cols;
    float s = 0.0f;
    for (long long j = threadIdx.x; j < cols; j += AK_THREADS) s += expf(xr[j]);  // the bug
    s = block_reduce(s, 0.0f, smem, SumOp());
    for (long long j = threadIdx.x; j < cols; j += AK_THREADS) yr[j] = expf(xr[j]) / s;
  }
}
