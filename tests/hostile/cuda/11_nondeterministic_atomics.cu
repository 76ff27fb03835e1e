// expect-status: FAIL
// expect-stage: verify.determinism
// Row sum by float atomicAdd into one global accumulator per row, each thread adding partials of
// 2 elements: within tolerance, but bitwise different from run to run. Caught by determinism.
//
// Why it is nondeterministic: float addition is not associative, and the order in which the L2
// atomic unit applies the ~cols/2 additions to one address depends on how the block's 8 warps
// are scheduled and how long each one's loads take, which varies from launch to launch. Every
// other step (max, exp, divide) is deterministic. The accumulator lives in device memory rather
// than a register tree so that the order is set by the memory system, not by the program.
//
// Accuracy: a serial fp32 sum of n terms errs by about 2^-24 * sqrt(n) / 3 relative; on wide rows
// each thread first sums a chunk of cols / 2048 elements so that n stays at ~2048 atomics per row
// and the error at ~1e-6, well inside rtol 2e-5 even at cols = 50257. Non-finite inputs as the
// honest candidate: NaN-propagating max, a NaN in the sum makes the row NaN.
// fp32 only: the data is read and written as float whatever AK_DTYPE says.

#include "prelude.cuh"

#define AK_ACC_BLOCKS (1 << 16)
#define AK_ATOMICS_PER_ROW 2048

__device__ float ak_row_sum[AK_ACC_BLOCKS];  // one accumulator per block, i.e. per row in flight

extern "C" __global__ void __launch_bounds__(AK_THREADS)
ak_softmax(const void* in, void* out, long long rows, long long cols) {
  __shared__ float smem[33];
  __shared__ float overflow_acc;  // accumulator of blocks past AK_ACC_BLOCKS (same atomics)
  const float* x = (const float*)in;
  float* y = (float*)out;
  float* acc = blockIdx.x < AK_ACC_BLOCKS ? &ak_row_sum[blockIdx.x] : &overflow_acc;
  // Elements per atomic: 2 up to 4096 columns, more on wider rows (see the accuracy note).
  long long chunk = (cols + AK_ATOMICS_PER_ROW - 1) / AK_ATOMICS_PER_ROW;
  if (chunk < 2) chunk = 2;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * cols;
    float* yr = y + row * cols;
    float m = neg_inf();
    for (long long j = threadIdx.x; j < cols; j += AK_THREADS) m = nan_max(m, xr[j]);
    m = block_reduce(m, neg_inf(), smem, MaxOp());  // also orders the reset below after the
                                                    // previous row's read of the accumulator
    if (threadIdx.x == 0) atomicExch(acc, 0.0f);
    __syncthreads();
    for (long long c0 = threadIdx.x * chunk; c0 < cols; c0 += (long long)AK_THREADS * chunk) {
      float part = 0.0f;
      for (long long j = c0; j < c0 + chunk && j < cols; ++j) part += expf(xr[j] - m);
      atomicAdd(acc, part);
    }
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) smem[32] = atomicAdd(acc, 0.0f);  // read back through the L2
    __syncthreads();
    const float s = smem[32];
    for (long long j = threadIdx.x; j < cols; j += AK_THREADS) yr[j] = expf(xr[j] - m) / s;
  }
}
