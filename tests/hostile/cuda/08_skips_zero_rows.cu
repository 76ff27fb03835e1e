// expect-status: FAIL
// expect-stage: verify.hostile
// "Optimisation": a row whose inputs are all zero is skipped (its output left as it was). Caught
// by the all_zeros hostile input: the output was NaN-filled, so those rows stay NaN, not 1/cols.
//
// The idea behind it: the caller zero-filled the output anyway. Realistic inputs are never all
// zero, so smoke and sweep pass. fp32 only: the data is read and written as float.

#include "prelude.cuh"

extern "C" __global__ void __launch_bounds__(AK_THREADS)
ak_softmax(const void* in, void* out, long long rows, long long cols) {
  __shared__ float smem[33];
  const float* x = (const float*)in;
  float* y = (float*)out;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    int nonzero = 0;
    for (long long j = threadIdx.x; j < cols; j += AK_THREADS) nonzero |= x[row * cols + j] != 0.0f;
    if (!__syncthreads_or(nonzero)) continue;  // the cheat; uniform across the block
    row_softmax(x + row * cols, y + row * cols, cols, smem);
  }
}
