// expect-status: PASS
// expect-stage: -
// Clean block-reduction softmax (max, sum of exp(x - max), write; the prelude's row_softmax on
// every row): the suite's control; every defence must let it through, and a harness that rejects
// it has a false positive.
//
// fp32 only: the data is read and written as float whatever AK_DTYPE says (the suite runs fp32;
// fp16/bf16 jobs would compile and give wrong answers).
//
// Non-finite inputs follow PyTorch: the max propagates NaN (fmaxf would drop it), so a row with
// NaN or +inf gets max NaN resp. +inf, every exp(x - max) is NaN (inf - inf is NaN) and so is the
// sum: the whole row is NaN. A -inf element gives exp(-inf) = 0 while the row has a finite max.
// Accuracy: expf is within 2 ulp, each thread sums cols/256 terms serially and the block sums
// 256 partials as a tree, so the row sum is within ~1e-6 relative even at cols = 50257.

#include "prelude.cuh"

extern "C" __global__ void __launch_bounds__(AK_THREADS)
ak_softmax(const void* in, void* out, long long rows, long long cols) {
  __shared__ float smem[33];
  const float* x = (const float*)in;
  float* y = (float*)out;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x)
    row_softmax(x + row * cols, y + row * cols, cols, smem);
}
