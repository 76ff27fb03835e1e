// expect-status: REJECTED
// expect-stage: verify.smoke
// Correct softmax, plus one store one element past the end of the output (out[rows * cols]).
// Caught by the guard band after the output buffer, checked after every call.
//
// fp32 only: the data is read and written as float whatever AK_DTYPE says.

#include "prelude.cuh"

extern "C" __global__ void __launch_bounds__(AK_THREADS)
ak_softmax(const void* in, void* out, long long rows, long long cols) {
  __shared__ float smem[33];
  const float* x = (const float*)in;
  float* y = (float*)out;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x)
    row_softmax(x + row * cols, y + row * cols, cols, smem);
  // The overrun: a plausible value, so only the guard band can tell.
  if (blockIdx.x == 0 && threadIdx.x == 0) y[rows * cols] = 0.5f;
}
