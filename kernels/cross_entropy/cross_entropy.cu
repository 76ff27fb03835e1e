// Cross-entropy loss per row of logits, CUDA starter candidate (compiled by NVRTC: device code
// only, no includes of the toolkit).
//
// Contract (kernels/cross_entropy/spec.cc):
//   extern "C" __global__ void ak_cross_entropy(const void* logits, const void* targets,
//                                               void* loss, long long rows, long long cols)
//   logits: [rows, cols] (-DAK_DTYPE=0|1|2: fp32, fp16, bf16); targets: [rows] int64 in
//   [0, cols); loss: [rows], the logits' dtype. loss[r] = logsumexp(x[r, :]) - x[r, t[r]], in fp32
//   (a target outside [0, cols) gives NaN). Launched with block = AK_THREADS and grid = rows
//   (AK_WARP_PER_ROW=0) or ceil(rows / (AK_THREADS / 32)) (AK_WARP_PER_ROW=1); rows are visited
//   with a grid-stride loop.
//
// Tunables:
//   AK_THREADS       threads per block (128, 256, 512, 1024)
//   AK_VEC           elements per load (1, 2, 4, 8) on the aligned part of a row; scalar head and tail
//   AK_WARP_PER_ROW  0: one block per row; 1: one warp per row (narrow rows)
//
// One pass over the logits: each thread keeps a running maximum m and the sum s of exp(x - m),
// rescaled when m grows (online softmax); the pairs are merged across the group. The loss is
// log(s) - (x_t - m), which keeps log(s) when x_t and m are huge. As in PyTorch, +inf or NaN in a
// row give NaN, and a target logit of -inf gives +inf.

#ifndef AK_THREADS
#define AK_THREADS 256
#endif
#ifndef AK_VEC
#define AK_VEC 8
#endif
#ifndef AK_WARP_PER_ROW
#define AK_WARP_PER_ROW 0
#endif

#include "../common/elem.cuh"
#include "../common/row.cuh"

#define AK_LOG2E 1.4426950408889634f

struct MaxSum {
  float m;  // running maximum (NaN once a NaN was seen)
  float s;  // sum of exp(x - m)
};

__device__ __forceinline__ void add(MaxSum& a, float v) {
  if (v > a.m) {
    // exp2f((v - v) * ...) is 1, or NaN for v = +inf: a row holding +inf has no finite softmax
    a.s = a.s * exp2f((a.m - v) * AK_LOG2E) + exp2f((v - v) * AK_LOG2E);
    a.m = v;
  } else if (v != __int_as_float(0xff800000)) {  // -inf adds nothing; NaN makes s NaN
    a.s += exp2f((v - a.m) * AK_LOG2E);
  }
}

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = (a.m > b.m || a.m != a.m) ? a.m : b.m;
  // x == m covers -inf == -inf (a sum of 0 stays 0 rather than 0 * NaN)
  const float sa = a.m == m ? a.s : a.s * exp2f((a.m - m) * AK_LOG2E);
  const float sb = b.m == m ? b.s : b.s * exp2f((b.m - m) * AK_LOG2E);
  return {m, sa + sb};
}

__device__ __forceinline__ MaxSum warp_merge(MaxSum v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    MaxSum o = {__shfl_xor_sync(0xffffffffu, v.m, off), __shfl_xor_sync(0xffffffffu, v.s, off)};
    v = merge(v, o);
  }
  return v;
}

extern "C" __global__ void __launch_bounds__(AK_THREADS)
ak_cross_entropy(const void* logits, const void* targets, void* loss, long long rows, long long cols) {
  const elem_t* X = (const elem_t*)logits;
  const long long* T = (const long long*)targets;
  elem_t* L = (elem_t*)loss;
#if !AK_WARP_PER_ROW
  __shared__ MaxSum part[32];
#endif
  const RowGroup g;
  const int t = g.t();
  for (long long row = g.first_row(); row < rows; row += g.row_stride()) {
    const elem_t* x = X + row * cols;
    // scalar head up to the first pack boundary, packs, scalar tail
    long long head = (long long)((sizeof(pack_t) - (unsigned long long)x % sizeof(pack_t)) % sizeof(pack_t) /
                                 sizeof(elem_t));
    if (head > cols) head = cols;
    const long long npacks = (cols - head) / AK_PACK;
    const pack_t* xp = (const pack_t*)(x + head);
    MaxSum a = {__int_as_float(0xff800000), 0.0f};
    for (long long j = t; j < head; j += g.kThreads) add(a, to_f32(x[j]));
    for (long long i = t; i < npacks; i += g.kThreads) {
      const pack_t p = xp[i];
#pragma unroll
      for (int k = 0; k < AK_PACK; ++k) add(a, to_f32(p.v[k]));
    }
    for (long long j = head + npacks * AK_PACK + t; j < cols; j += g.kThreads) add(a, to_f32(x[j]));
    a = warp_merge(a);
#if !AK_WARP_PER_ROW
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    __syncthreads();  // the previous row's partials may still be read
    if (lane == 0) part[warp] = a;
    __syncthreads();
    if (warp == 0) {
      MaxSum w = lane < AK_THREADS / 32 ? part[lane] : MaxSum{__int_as_float(0xff800000), 0.0f};
      a = warp_merge(w);
    }
#endif
    if (t == 0) {
      const long long tgt = T[row];
      const float xt = (tgt >= 0 && tgt < cols) ? to_f32(x[tgt]) : __int_as_float(0x7fc00000);
      L[row] = from_f32(logf(a.s) - (xt - a.m));
    }
  }
}
