// Layer normalisation over the last dimension with weight and bias, CUDA starter candidate
// (compiled by NVRTC: device code only, no includes of the toolkit).
//
// Contract (kernels/layernorm/spec.cc):
//   extern "C" __global__ void ak_layernorm(const void* x, const void* w, const void* b, void* y,
//                                           long long rows, long long cols)
//   x, y: [rows, cols]; w, b: [cols]; one dtype (-DAK_DTYPE=0|1|2: fp32, fp16, bf16).
//   y = (x - mean) * rsqrt(var + 1e-5) * w + b with the biased variance, in fp32, rounded once.
//   Launched with block = AK_THREADS and grid = rows (AK_WARP_PER_ROW=0) or
//   ceil(rows / (AK_THREADS / 32)) (AK_WARP_PER_ROW=1); rows are visited with a grid-stride loop.
//
// Tunables:
//   AK_THREADS       threads per block (128, 256, 512, 1024)
//   AK_VEC           elements per load and store (1, 2, 4, 8) when cols is a multiple of the pack
//                    and x, w, b, y are aligned to it; otherwise scalar
//   AK_WARP_PER_ROW  0: one block per row; 1: one warp per row (narrow rows)
//   AK_CACHE         packs per thread held in registers (0, 2, 4, 8, 16; row.cuh's RowCache): a
//                    vector row of at most AK_CACHE packs per thread is loaded once, every load in
//                    flight at once, and the three passes run from registers
//
// Three passes over the row: the mean, the variance as the mean of (x - mean)^2 (no
// cancellation when |mean| >> std, unlike E[x^2] - E[x]^2), then the output. Passes two and three
// read the row from L1 or L2: DRAM sees x once and y once.

#ifndef AK_THREADS
#define AK_THREADS 256
#endif
#ifndef AK_VEC
#define AK_VEC 8
#endif
#ifndef AK_WARP_PER_ROW
#define AK_WARP_PER_ROW 0
#endif
#define AK_LN_EPS 1e-5f

#include "../common/elem.cuh"
#include "../common/row.cuh"

extern "C" __global__ void __launch_bounds__(AK_THREADS, AK_MIN_BLOCKS)
    ak_layernorm(const void* x_, const void* w_, const void* b_, void* y_, long long rows, long long cols) {
  const elem_t* __restrict__ X = (const elem_t*)x_;
  const elem_t* __restrict__ W = (const elem_t*)w_;
  const elem_t* __restrict__ B = (const elem_t*)b_;
  elem_t* __restrict__ Y = (elem_t*)y_;
  __shared__ float smem[33];
  const RowGroup g;
  const int t = g.t();
  const bool vec =
      cols % AK_PACK == 0 && pack_aligned(X) && pack_aligned(W) && pack_aligned(B) && pack_aligned(Y);
  const long long npacks = cols / AK_PACK;
  const float inv_cols = 1.0f / (float)cols;
  for (long long row = g.first_row(); row < rows; row += g.row_stride()) {
    const elem_t* x = X + row * cols;
    elem_t* y = Y + row * cols;
#if AK_CACHE > 0
    if (vec && RowCache::fits(npacks, g.kThreads)) {
      // The three passes from registers: the row is read from memory once (zero padding adds
      // nothing to the mean; the variance skips it).
      RowCache c;
      c.load((const pack_t*)x, t, g.kThreads, npacks, 0u);
      float s2[2] = {0.0f, 0.0f};
#pragma unroll
      for (int j = 0; j < AK_CACHE; ++j)
#pragma unroll
        for (int k = 0; k < AK_PACK; ++k) s2[k & 1] += c.get(j, k);
      c.fence();
      const float mean = g.sum(s2[0] + s2[1], smem) * inv_cols;
      float ss2[2] = {0.0f, 0.0f};
#pragma unroll
      for (int j = 0; j < AK_CACHE; ++j)
        if (t + (long long)j * g.kThreads < npacks) {
#pragma unroll
          for (int k = 0; k < AK_PACK; ++k) {
            const float d = c.get(j, k) - mean;
            ss2[k & 1] = fmaf(d, d, ss2[k & 1]);
          }
        }
      c.fence();
      const float r = rsqrtf(g.sum(ss2[0] + ss2[1], smem) * inv_cols + AK_LN_EPS);
#pragma unroll
      for (int j = 0; j < AK_CACHE; ++j) {
        const long long i = t + (long long)j * g.kThreads;
        if (i < npacks) {
          const pack_t q = ((const pack_t*)W)[i];
          const pack_t b = ((const pack_t*)B)[i];
          pack_t o;
#pragma unroll
          for (int k = 0; k < AK_PACK; ++k)
            o.v[k] = from_f32(fmaf((c.get(j, k) - mean) * r, to_f32(q.v[k]), to_f32(b.v[k])));
          ((pack_t*)y)[i] = o;
        }
      }
      continue;
    }
#endif
    float s = 0.0f;
    if (vec) {
      for (long long i = t; i < npacks; i += g.kThreads) {
        const pack_t p = ((const pack_t*)x)[i];
#pragma unroll
        for (int k = 0; k < AK_PACK; ++k) s += to_f32(p.v[k]);
      }
    } else {
      for (long long j = t; j < cols; j += g.kThreads) s += to_f32(x[j]);
    }
    const float mean = g.sum(s, smem) * inv_cols;
    float ss = 0.0f;
    if (vec) {
      for (long long i = t; i < npacks; i += g.kThreads) {
        const pack_t p = ((const pack_t*)x)[i];
#pragma unroll
        for (int k = 0; k < AK_PACK; ++k) {
          const float d = to_f32(p.v[k]) - mean;
          ss = fmaf(d, d, ss);
        }
      }
    } else {
      for (long long j = t; j < cols; j += g.kThreads) {
        const float d = to_f32(x[j]) - mean;
        ss = fmaf(d, d, ss);
      }
    }
    const float r = rsqrtf(g.sum(ss, smem) * inv_cols + AK_LN_EPS);
    if (vec) {
      for (long long i = t; i < npacks; i += g.kThreads) {
        const pack_t p = ((const pack_t*)x)[i];
        const pack_t q = ((const pack_t*)W)[i];
        const pack_t c = ((const pack_t*)B)[i];
        pack_t o;
#pragma unroll
        for (int k = 0; k < AK_PACK; ++k)
          o.v[k] = from_f32(fmaf((to_f32(p.v[k]) - mean) * r, to_f32(q.v[k]), to_f32(c.v[k])));
        ((pack_t*)y)[i] = o;
      }
    } else {
      for (long long j = t; j < cols; j += g.kThreads)
        y[j] = from_f32(fmaf((to_f32(x[j]) - mean) * r, to_f32(W[j]), to_f32(B[j])));
    }
  }
}
