// expect-status: COMPILE_ERROR|FAIL
// expect-stage: compile|load
// A correct softmax that stages its row in a static __shared__ array of 300 KiB, more than the
// 227 KiB a block may have on sm_90. Caught by ptxas at compile; failing that, by load or launch.
//
// ptxas enforces the per-block limit (0x38c00 bytes on sm_90a) on static shared memory too;
// were it to let the array through, the module load or launch must fail cleanly.
// The array is really used (each row is staged through it), so it cannot be optimised away.
// fp32 only: the data is read and written as float whatever AK_DTYPE says.

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
