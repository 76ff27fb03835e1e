// Row-wise softmax over the last dimension, CUDA starter candidate (compiled by NVRTC: device
// code only, no includes; fp16/bf16 conversions by PTX cvt instructions).
//
// Contract (kernels/softmax/spec.cc):
//   extern "C" __global__ void ak_softmax(const void* in, void* out, long long rows, long long cols)
//   compiled with -DAK_DTYPE=0|1|2 (fp32, fp16, bf16); launched with grid/block from
//   softmax_cuda_geometry(): block = AK_THREADS threads, no dynamic shared memory, and
//   grid = rows (AK_WARP_PER_ROW=0) or ceil(rows / (AK_THREADS / 32)) (AK_WARP_PER_ROW=1).
//   Any grid size is correct: rows are visited with a grid-stride loop.
//
// Tunables:
//   AK_THREADS       threads per block (128, 256, 512, 1024)
//   AK_VEC           elements per load/store (1, 2, 4, 8) on the aligned part of each row, scalar
//                    head and tail; a pack is at most 16 bytes (fp32 at 8 loads 4 at a time)
//   AK_WARP_PER_ROW  0: one block per row, block-wide reduction (wide rows); 1: one warp per row,
//                    AK_THREADS/32 rows per block, warp-shuffle reduction only (narrow rows)
//   AK_CACHE         packs per thread kept in registers between the two passes (0, 2, 4, 8, 16): a
//                    row of at most AK_CACHE packs per thread of its group is read from memory
//                    once, every load issued before the first is used; a longer row, or 0, reads
//                    it twice
//
// Algorithm: one read pass keeps a running (max, sum of exp) per thread, updated once per vector
// (online softmax, Milakov & Gimelshein 2018), reduced across the group with warp shuffles; a
// second read pass writes exp(x - max) / sum. From the register cache, a thread first takes the
// maximum of its values, then their sum of exp against it: no rescaling. All arithmetic in fp32.
// Exponents are formed as
// (x - max) * log2(e), never x * log2(e) - max * log2(e): the rounding of the two large products
// biases terms by up to |max| * 2^-24 relative, which broke the fp32 tolerance on the H200 for
// rows with a large offset.

#ifndef AK_THREADS
#define AK_THREADS 256
#endif
#ifndef AK_VEC
#define AK_VEC 4
#endif
#ifndef AK_WARP_PER_ROW
#define AK_WARP_PER_ROW 0
#endif
#ifndef AK_CACHE
#define AK_CACHE 0
#endif

#include "../common/elem.cuh"
#include "../common/row.cuh"

#define AK_LOG2E 1.4426950408889634f

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

// Running softmax statistics: max m and sum s of exp(x - m).
struct stats_t {
  float m;
  float s;
};

__device__ __forceinline__ stats_t combine(stats_t a, stats_t b) {
  float m = fmaxf(a.m, b.m);
  // Both empty, or one a NaN among nothing but -inf (fmaxf dropped it): keep the NaN, which makes
  // the row's sum NaN at the next merge with anything finite, and its output NaN.
  if (m == neg_inf()) return b.m != b.m ? b : a;
  float sa = a.m == neg_inf() ? 0.0f : a.s * exp2f((a.m - m) * AK_LOG2E);
  float sb = b.m == neg_inf() ? 0.0f : b.s * exp2f((b.m - m) * AK_LOG2E);
  stats_t r;
  r.m = m;
  r.s = sa + sb;
  return r;
}

// Folds n values (already converted) into the running statistics, one rescale per call.
__device__ __forceinline__ void accumulate(stats_t& st, const float* v, int n) {
  float cm = v[0];
#pragma unroll
  for (int i = 1; i < n; ++i) cm = fmaxf(cm, v[i]);
  float m = fmaxf(st.m, cm);
  if (m == neg_inf()) {
    // Nothing but -inf (masked elements) so far: the statistics stay empty, unless a NaN came
    // along (fmaxf drops it), which must reach the output as it does in PyTorch.
#pragma unroll
    for (int i = 0; i < n; ++i)
      if (v[i] != v[i]) st.m = v[i];
    return;
  }
  float s = st.m == neg_inf() ? 0.0f : st.s * exp2f((st.m - m) * AK_LOG2E);
#pragma unroll
  for (int i = 0; i < n; ++i) s += exp2f((v[i] - m) * AK_LOG2E);
  st.m = m;
  st.s = s;
}

__device__ __forceinline__ stats_t warp_reduce(stats_t st) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    stats_t o;
    o.m = __shfl_xor_sync(0xffffffffu, st.m, off);
    o.s = __shfl_xor_sync(0xffffffffu, st.s, off);
    st = combine(st, o);
  }
  return st;
}

#if AK_CACHE > 0
// (max, sum of exp) of a thread's cached packs, those past the row holding -inf: the maximum first,
// then the sum against it, so no term is rescaled; merged into st. A NaN reaches the sum (or, among
// nothing but -inf, the maximum) as in accumulate().
__device__ __forceinline__ void accumulate_cache(stats_t& st, RowCache& c) {
  float cm = neg_inf();
  bool nan = false;
#pragma unroll
  for (int j = 0; j < AK_CACHE; ++j)
#pragma unroll
    for (int k = 0; k < AK_PACK; ++k) {
      const float v = c.get(j, k);
      cm = fmaxf(cm, v);
      nan |= v != v;
    }
  c.fence();
  stats_t own;
  own.m = cm;
  own.s = 0.0f;
  if (cm == neg_inf()) {
    if (nan) own.m = __int_as_float(0x7fffffff);
  } else {
#pragma unroll
    for (int j = 0; j < AK_CACHE; ++j)
#pragma unroll
      for (int k = 0; k < AK_PACK; ++k) own.s += exp2f((c.get(j, k) - cm) * AK_LOG2E);
  }
  c.fence();
  st = combine(st, own);
}
#endif

// The group's statistics from each thread's: warp shuffles, then for a block group one stats_t
// per warp in smem plus the result.
template <bool kBlock>
__device__ __forceinline__ stats_t group_reduce(stats_t st, int t, int nthreads, stats_t* smem) {
  st = warp_reduce(st);
  if (kBlock) {
    const int warp = t >> 5;
    const int lane = t & 31;
    const int nwarps = nthreads >> 5;
    __syncthreads();  // smem may still be read by the previous row's broadcast
    if (lane == 0) smem[warp] = st;
    __syncthreads();
    if (warp == 0) {
      stats_t w;
      w.m = neg_inf();
      w.s = 0.0f;
      if (lane < nwarps) w = smem[lane];
      w = warp_reduce(w);
      if (lane == 0) smem[32] = w;
    }
    __syncthreads();
    st = smem[32];
  }
  return st;
}

__device__ __forceinline__ pack_t softmax_pack(pack_t p, float m, float inv) {
  pack_t q;
#pragma unroll
  for (int k = 0; k < AK_PACK; ++k) q.v[k] = from_f32(exp2f((to_f32(p.v[k]) - m) * AK_LOG2E) * inv);
  return q;
}

// Writes pack i of the row's pack region (y + head), element by element where y is misaligned
// relative to x.
__device__ __forceinline__ void store_pack(elem_t* y, long long head, long long i, bool ypacked, pack_t q) {
  if (ypacked) {
    ((pack_t*)(y + head))[i] = q;
  } else {
#pragma unroll
    for (int k = 0; k < AK_PACK; ++k) y[head + i * AK_PACK + k] = q.v[k];
  }
}

// Softmax of one row by a group of `nthreads` threads (a block or a warp); `t` is the thread's
// index in the group. For a block group, smem holds one stats_t per warp plus the result.
template <bool kBlock>
__device__ __forceinline__ void row_softmax(const elem_t* __restrict__ x, elem_t* __restrict__ y, long long cols, int t,
                                            int nthreads, stats_t* smem) {
  const RowSplit sp = row_split(x, cols);
  const long long head = sp.head, npacks = sp.npacks, tail_start = sp.tail_start;
  const pack_t* xp = sp.xp;
  const bool ypacked = ((unsigned long long)(y + head)) % sizeof(pack_t) == 0;

  stats_t st;
  st.m = neg_inf();
  st.s = 0.0f;
  for (long long i = t; i < head; i += nthreads) {
    float v = to_f32(x[i]);
    accumulate(st, &v, 1);
  }
  for (long long i = tail_start + t; i < cols; i += nthreads) {
    float v = to_f32(x[i]);
    accumulate(st, &v, 1);
  }
#if AK_CACHE > 0
  const bool cached = RowCache::fits(npacks, nthreads);
  RowCache c;
  if (cached) {
    // padding of -inf: nothing to the maximum or the sum
#if AK_DTYPE == 0
    c.load(xp, t, nthreads, npacks, 0xff800000u);
#elif AK_DTYPE == 1
    c.load(xp, t, nthreads, npacks, 0xfc00fc00u);
#else
    c.load(xp, t, nthreads, npacks, 0xff80ff80u);
#endif
    accumulate_cache(st, c);
  } else
#endif
    for (long long i = t; i < npacks; i += nthreads) {
      pack_t p = xp[i];
      float v[AK_PACK];
#pragma unroll
      for (int k = 0; k < AK_PACK; ++k) v[k] = to_f32(p.v[k]);
      accumulate(st, v, AK_PACK);
    }
  st = group_reduce<kBlock>(st, t, nthreads, smem);

  const float m = st.m;
  const float inv = 1.0f / st.s;
  for (long long i = t; i < head; i += nthreads) y[i] = from_f32(exp2f((to_f32(x[i]) - m) * AK_LOG2E) * inv);
#if AK_CACHE > 0
  if (cached) {
#pragma unroll
    for (int j = 0; j < AK_CACHE; ++j) {
      const long long i = t + (long long)j * nthreads;
      if (i < npacks) {
        pack_t q;
#pragma unroll
        for (int k = 0; k < AK_PACK; ++k) q.v[k] = from_f32(exp2f((c.get(j, k) - m) * AK_LOG2E) * inv);
        store_pack(y, head, i, ypacked, q);
      }
    }
  } else
#endif
    for (long long i = t; i < npacks; i += nthreads) store_pack(y, head, i, ypacked, softmax_pack(xp[i], m, inv));
  for (long long i = tail_start + t; i < cols; i += nthreads)
    y[i] = from_f32(exp2f((to_f32(x[i]) - m) * AK_LOG2E) * inv);
}

extern "C" __global__ void __launch_bounds__(AK_THREADS, AK_MIN_BLOCKS)
    ak_softmax(const void* in, void* out, long long rows, long long cols) {
  const elem_t* x = (const elem_t*)in;
  elem_t* y = (elem_t*)out;
#if AK_WARP_PER_ROW
  const int warps = AK_THREADS / 32;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  for (long long row = (long long)blockIdx.x * warps + warp; row < rows; row += (long long)gridDim.x * warps)
    row_softmax<false>(x + row * cols, y + row * cols, cols, lane, 32, nullptr);
#else
  __shared__ stats_t smem[33];
  for (long long row = blockIdx.x; row < rows; row += gridDim.x)
    row_softmax<true>(x + row * cols, y + row * cols, cols, threadIdx.x, AK_THREADS, smem);
#endif
}
