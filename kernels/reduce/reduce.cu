// Row-wise reduction over the last dimension (sum, or max with AK_REDUCE_MAX=1), CUDA starter
// candidate (compiled by NVRTC: device code only, no includes).
//
// Contract (kernels/reduce/spec.cc):
//   extern "C" __global__ void ak_reduce(const void* in, void* out, long long rows, long long cols)
//   in: [rows, cols], out: [rows], same dtype (-DAK_DTYPE=0|1|2: fp32, fp16, bf16), fp32
//   accumulation. Launched with block = AK_THREADS and grid = rows (AK_WARP_PER_ROW=0) or
//   ceil(rows / (AK_THREADS / 32)) (AK_WARP_PER_ROW=1); rows are visited with a grid-stride loop.
//
// Tunables:
//   AK_THREADS       threads per block (128, 256, 512, 1024)
//   AK_VEC           elements per load (1, 2, 4, 8) on the aligned part of a row; scalar head and tail
//   AK_WARP_PER_ROW  0: one block per row, block-wide reduction; 1: one warp per row (narrow rows)
//
// Semantics as in PyTorch: sum gives inf for overflow, NaN for NaN or inf - inf; max propagates
// NaN (the reduction uses a max that keeps NaN, not fmaxf).

#ifndef AK_REDUCE_MAX
#define AK_REDUCE_MAX 0
#endif
#ifndef AK_THREADS
#define AK_THREADS 256
#endif
#ifndef AK_VEC
#define AK_VEC 4
#endif
#ifndef AK_WARP_PER_ROW
#define AK_WARP_PER_ROW 0
#endif

#include "../common/elem.cuh"
#include "../common/row.cuh"

#if AK_REDUCE_MAX
__device__ __forceinline__ float identity() { return __int_as_float(0xff800000); }  // -inf
__device__ __forceinline__ float op(float a, float b) { return (a > b || a != a) ? a : b; }  // keeps NaN
#else
__device__ __forceinline__ float identity() { return 0.0f; }
__device__ __forceinline__ float op(float a, float b) { return a + b; }
#endif

__device__ __forceinline__ float warp_reduce(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// Reduction of one row by a group of `nthreads` threads (a block or a warp); `t` is the thread's
// index in the group. For a block group, smem holds one partial per warp plus the result.
template <bool kBlock>
__device__ __forceinline__ float row_reduce(const elem_t* __restrict__ x, long long cols, int t, int nthreads,
                                            float* smem) {
  const RowSplit sp = row_split(x, cols);
  const long long head = sp.head, npacks = sp.npacks, tail_start = sp.tail_start;
  const pack_t* xp = sp.xp;

  float acc = identity();
  for (long long i = t; i < head; i += nthreads) acc = op(acc, to_f32(x[i]));
  for (long long i = t; i < npacks; i += nthreads) {
    pack_t p = xp[i];
#pragma unroll
    for (int k = 0; k < AK_PACK; ++k) acc = op(acc, to_f32(p.v[k]));
  }
  for (long long i = tail_start + t; i < cols; i += nthreads) acc = op(acc, to_f32(x[i]));

  acc = warp_reduce(acc);
  if (kBlock) {
    const int warp = t >> 5;
    const int lane = t & 31;
    const int nwarps = nthreads >> 5;
    __syncthreads();  // smem may still be read by the previous row's broadcast
    if (lane == 0) smem[warp] = acc;
    __syncthreads();
    if (warp == 0) {
      float w = lane < nwarps ? smem[lane] : identity();
      w = warp_reduce(w);
      if (lane == 0) smem[32] = w;
    }
    __syncthreads();
    acc = smem[32];
  }
  return acc;
}

extern "C" __global__ void __launch_bounds__(AK_THREADS)
ak_reduce(const void* in, void* out, long long rows, long long cols) {
  const elem_t* x = (const elem_t*)in;
  elem_t* y = (elem_t*)out;
#if AK_WARP_PER_ROW
  const int warps = AK_THREADS / 32;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  for (long long row = (long long)blockIdx.x * warps + warp; row < rows; row += (long long)gridDim.x * warps) {
    float v = row_reduce<false>(x + row * cols, cols, lane, 32, nullptr);
    if (lane == 0) y[row] = from_f32(v);
  }
#else
  __shared__ float smem[33];
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    float v = row_reduce<true>(x + row * cols, cols, threadIdx.x, AK_THREADS, smem);
    if (threadIdx.x == 0) y[row] = from_f32(v);
  }
#endif
}
