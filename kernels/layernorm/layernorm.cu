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

extern "C" __global__ void __launch_bounds__(AK_THREADS)
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
