// expect-status: REJECTED
// expect-stage: verify.smoke
// Correct output, but after finishing a row the block overwrites that row's first input element.
// Caught by comparing the inputs with their copies after the call.
//
// fp32 only: the data is read and written as float whatever AK_DTYPE says. The write comes after
// the block's last read of its own row (other blocks never read it), so the output stays correct.

#include "prelude.cuh"

extern "C" __global__ void __launch_bounds__(AK_THREADS)
ak_softmax(const void* in, void* out, long long rows, long long cols) {
  __shared__ float smem[33];
  float* x = (float*)in;  // the const is cast away on purpose
  float* y = (float*)out;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    row_softmax(x + row * cols, y + row * cols, cols, smem);
    __syncthreads();  // every thread's last read of the row is done
    if (threadIdx.x == 0) x[row * cols] = 12345.0f;  // changes the bits of any real input
  }
}
