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
//   AK_CHUNK         packs a thread loads before it uses any (1, 2, 4, 8): with more than one, the
//                    chunk's maximum is taken first, the sum rescaled at most once a chunk, and the
//                    chunk's exps summed in AK_PACK independent partial sums (no chain of
//                    dependent adds); 1 is the element-by-element update below
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
#ifndef AK_CHUNK
#define AK_CHUNK 1
#endif
#if AK_CHUNK != 1 && AK_CHUNK != 2 && AK_CHUNK != 4 && AK_CHUNK != 8
#error "AK_CHUNK must be 1, 2, 4 or 8"
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

#if AK_CHUNK > 1
// Folds AK_CHUNK packs into a: the chunk's maximum first (a NaN is left to the sum, which it makes
// NaN), the sum rescaled once if it grew, then every exp against it. -inf adds nothing (also
// where the maximum is -inf, which would make the exponent NaN); +inf makes the maximum +inf and
// its own term NaN, as in add().
__device__ __forceinline__ void add_chunk(MaxSum& a, const pack_t* c) {
  float cm = a.m;
#pragma unroll
  for (int j = 0; j < AK_CHUNK; ++j)
#pragma unroll
    for (int k = 0; k < AK_PACK; ++k) cm = fmaxf(cm, to_f32(c[j].v[k]));
  if (cm > a.m) {
    a.s *= exp2f((a.m - cm) * AK_LOG2E);
    a.m = cm;
  }
  float part[AK_PACK];
#pragma unroll
  for (int k = 0; k < AK_PACK; ++k) part[k] = 0.0f;
#pragma unroll
  for (int j = 0; j < AK_CHUNK; ++j)
#pragma unroll
    for (int k = 0; k < AK_PACK; ++k) {
      const float v = to_f32(c[j].v[k]);
      part[k] += v == __int_as_float(0xff800000) ? 0.0f : exp2f((v - a.m) * AK_LOG2E);
    }
#pragma unroll
  for (int k = 1; k < AK_PACK; ++k) part[0] += part[k];
  a.s += part[0];
}
#endif

__device__ __forceinline__ MaxSum warp_merge(MaxSum v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    MaxSum o = {__shfl_xor_sync(0xffffffffu, v.m, off), __shfl_xor_sync(0xffffffffu, v.s, off)};
    v = merge(v, o);
  }
  return v;
}

// With chunks, one block per SM may take every register: ptxas otherwise aims at more blocks and
// spills the chunk.
#undef AK_MIN_BLOCKS  // row.cuh's, for its register cache
#if AK_CHUNK > 1
#define AK_MIN_BLOCKS 1
#else
#define AK_MIN_BLOCKS 0
#endif
extern "C" __global__ void __launch_bounds__(AK_THREADS, AK_MIN_BLOCKS)
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
    const RowSplit sp = row_split(x, cols);
    const long long head = sp.head, npacks = sp.npacks;
    const pack_t* xp = sp.xp;
    MaxSum a = {__int_as_float(0xff800000), 0.0f};
    for (long long j = t; j < head; j += g.kThreads) add(a, to_f32(x[j]));
#if AK_CHUNK > 1
    pack_t ninf;
#pragma unroll
    for (int k = 0; k < AK_PACK; ++k) ninf.v[k] = from_f32(__int_as_float(0xff800000));
    for (long long i0 = t; i0 < npacks; i0 += (long long)AK_CHUNK * g.kThreads) {
      pack_t c[AK_CHUNK];
#pragma unroll
      for (int j = 0; j < AK_CHUNK; ++j) {
        const long long i = i0 + (long long)j * g.kThreads;
        c[j] = i < npacks ? xp[i] : ninf;
      }
      add_chunk(a, c);
    }
#else
    for (long long i = t; i < npacks; i += g.kThreads) {
      const pack_t p = xp[i];
#pragma unroll
      for (int k = 0; k < AK_PACK; ++k) add(a, to_f32(p.v[k]));
    }
#endif
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
