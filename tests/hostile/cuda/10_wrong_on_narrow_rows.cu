// expect-status: FAIL
// expect-stage: verify.edge
// Correct for rows of 256 columns or more; a "narrow-row fast path" for cols < 256 copies the
// input through unnormalised. Caught by the edge shapes 1x1, 1x127 and 127x1 (all else is wide).
//
// fp32 only: the data is read and written as float whatever AK_DTYPE says.

#include "prelude.cuh"

extern "C" __global__ void __launch_bounds__(AK_THREADS)
ak_softmax(const void* in, void* out, long long rows, long long cols) {
  __shared__ float smem[33];
  const float* x = (const float*)in;
  float* y = (float*)out;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    if (cols < AK_THREADS) {
      // The bug: the narrow path forgot the softmax altogether.
      for (long long j = threadIdx.x; j < cols; j += AK_THREADS) y[row * cols + j] = x[row * cols + j];
    } else {
      row_softmax(x + row * cols, y + row * cols, cols, smem);
    }
  }
}
