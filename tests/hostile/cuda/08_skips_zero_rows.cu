// expect-status: FAIL
// expect-stage: verify.hostile
// "Optimisation": a row whose inputs are all zero is skipped (its output left as it was). Caught
// by the all_zeros hostile input: the output was NaN-filled, so those rows stay NaN, not 1/cols.
//
// The idea behind it: the caller zero-filled the output anyway. Realistic inputs are never all
// zero, so smoke and sweep pass. fp32 only: the data is read and written as float.

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

// Correct softmax of one row by the whole block (max, sum of exp(x - max), write).
__device__ __forceinline__ void row_softmax(const float* xr, float* yr, long long cols, float* smem) {
  float m = neg_inf();
  for (long long j = threadIdx.x; j < cols; j += AK_THREADS) m = nan_max(m, xr[j]);
  m = block_reduce(m, neg_inf(), smem, MaxOp());
  float s = 0.0f;
  for (long long j = threadIdx.x; j < cols; j += AK_THREADS) s += expf(xr[j] - m);
  s = block_reduce(s, 0.0f, smem, SumOp());
  for (long long j = threadIdx.x; j < cols; j += AK_THREADS) yr[j] = expf(xr[j] - m) / s;
}

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
