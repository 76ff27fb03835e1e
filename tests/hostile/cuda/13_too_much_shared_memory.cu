// expect-status: COMPILE_ERROR|FAIL
// expect-stage: compile|load
// A correct softmax that stages its row in a static __shared__ array of 300 KiB, more than the
// 227 KiB a block may have on sm_90. Caught by ptxas at compile; failing that, by load or launch.
//
// ptxas enforces the per-block limit (0x38c00 bytes on sm_90a) on static shared memory too;
// were it to let the array through, the module load or launch must fail cleanly.
// The array is really used (each row is staged through it), so it cannot be optimised away.
// fp32 only: the data is read and written as float whatever AK_DTYPE says.

#include "prelude.cuh"

#define AK_STAGE_FLOATS (300 * 1024 / 4)  // 300 KiB

extern "C" __global__ void __launch_bounds__(AK_THREADS)
ak_softmax(const void* in, void* out, long long rows, long long cols) {
  __shared__ float smem[33];
  __shared__ float stage[AK_STAGE_FLOATS];
  const float* x = (const float*)in;
  float* y = (float*)out;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * cols;
    float* yr = y + row * cols;
    float m = neg_inf();
    for (long long j = threadIdx.x; j < cols; j += AK_THREADS) {
      const float v = xr[j];
      if (j < AK_STAGE_FLOATS) stage[j] = v;
      m = nan_max(m, v);
    }
    m = block_reduce(m, neg_inf(), smem, MaxOp());
    float s = 0.0f;
    for (long long j = threadIdx.x; j < cols; j += AK_THREADS)
      s += expf((j < AK_STAGE_FLOATS ? stage[j] : xr[j]) - m);
    s = block_reduce(s, 0.0f, smem, SumOp());
    for (long long j = threadIdx.x; j < cols; j += AK_THREADS)
      yr[j] = expf((j < AK_STAGE_FLOATS ? stage[j] : xr[j]) - m) / s;
    __syncthreads();  // the next row overwrites stage
  }
}
