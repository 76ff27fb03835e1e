// expect-status: FAIL
// expect-stage: verify.hostile
// Softmax without max subtraction, exp(x) / sum(exp(x)): fine on realistic logits, but near the
// dtype max expf overflows to inf and inf / inf is NaN. Caught by the near_max hostile input.
//
// Realistic logits stay below |x| ~ 60, far from expf's overflow at 88.7, so smoke and sweep
// pass. fp32 only: the data is read and written as float whatever AK_DTYPE says.

#include "prelude.cuh"

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
