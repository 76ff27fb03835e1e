// RMS normalisation over the last dimension, CUDA starter candidate (compiled by NVRTC: device
// code only, no includes of the toolkit).
//
// Contract (kernels/rmsnorm/spec.cc):
//   extern "C" __global__ void ak_rmsnorm(const void* x, const void* w, void* y, long long rows,
//                                         long long cols)
//   x, y: [rows, cols]; w: [cols]; one dtype (-DAK_DTYPE=0|1|2: fp32, fp16, bf16).
//   y = x * rsqrt(mean(x^2) + 1e-6) * w, in fp32, rounded once to the dtype.
//   Launched with block = AK_THREADS and grid = rows (AK_WARP_PER_ROW=0) or
//   ceil(rows / (AK_THREADS / 32)) (AK_WARP_PER_ROW=1); rows are visited with a grid-stride loop.
//
// Tunables:
//   AK_THREADS       threads per block (128, 256, 512, 1024)
//   AK_VEC           elements per load and store (1, 2, 4, 8) when cols is a multiple of the pack
//                    and x, w, y are aligned to it; otherwise scalar
//   AK_WARP_PER_ROW  0: one block per row; 1: one warp per row (narrow rows)
//   AK_CACHE         packs per thread held in registers (0, 2, 4, 8, 16; row.cuh's RowCache): a
//                    vector row of at most AK_CACHE packs per thread is loaded once, every load in
//                    flight at once, and both passes run from registers
//
// Two passes over the row: the sum of squares, then the output. The second pass reads the row
// again, from L1 or L2 (a row is at most a few hundred KiB): DRAM sees x once and y once.
// inf in a row gives rsqrt(inf) = 0, so its finite elements become 0 and the infinities NaN, as
// in PyTorch.

#ifndef AK_THREADS
#define AK_THREADS 256
#endif
#ifndef AK_VEC
#define AK_VEC 8
#endif
#ifndef AK_WARP_PER_ROW
#define AK_WARP_PER_ROW 0
#endif
#define AK_RMS_EPS 1e-6f

#include "../common/elem.cuh"
#include "../common/row.cuh"

extern "C" __global__ void __launch_bounds__(AK_THREADS, AK_MIN_BLOCKS)
    ak_rmsnorm(const void* x_, const void* w_, void* y_, long long rows, long long cols) {
  const elem_t* __restrict__ X = (const elem_t*)x_;
  const elem_t* __restrict__ W = (const elem_t*)w_;
  elem_t* __restrict__ Y = (elem_t*)y_;
  __shared__ float smem[33];
  const RowGroup g;
  const int t = g.t();
  const bool vec = cols % AK_PACK == 0 && pack_aligned(X) && pack_aligned(W) && pack_aligned(Y);
  const long long npacks = cols / AK_PACK;
  for (long long row = g.first_row(); row < rows; row += g.row_stride()) {
    const elem_t* x = X + row * cols;
    elem_t* y = Y + row * cols;
#if AK_CACHE > 0
    if (vec && RowCache::fits(npacks, g.kThreads)) {
      // The row from registers: read from memory once (zero padding adds nothing to the sum).
      RowCache c;
      c.load((const pack_t*)x, t, g.kThreads, npacks, 0u);
      float ss2[2] = {0.0f, 0.0f};
#pragma unroll
      for (int j = 0; j < AK_CACHE; ++j)
#pragma unroll
        for (int k = 0; k < AK_PACK; ++k) {
          const float v = c.get(j, k);
          ss2[k & 1] = fmaf(v, v, ss2[k & 1]);
        }
      c.fence();
      const float r = rsqrtf(g.sum(ss2[0] + ss2[1], smem) / (float)cols + AK_RMS_EPS);
#pragma unroll
      for (int j = 0; j < AK_CACHE; ++j) {
        const long long i = t + (long long)j * g.kThreads;
        if (i < npacks) {
          const pack_t q = ((const pack_t*)W)[i];
          pack_t o;
#pragma unroll
          for (int k = 0; k < AK_PACK; ++k) o.v[k] = from_f32(c.get(j, k) * r * to_f32(q.v[k]));
          ((pack_t*)y)[i] = o;
        }
      }
      continue;
    }
#endif
    float ss = 0.0f;
    if (vec) {
      for (long long i = t; i < npacks; i += g.kThreads) {
        const pack_t p = ((const pack_t*)x)[i];
#pragma unroll
        for (int k = 0; k < AK_PACK; ++k) {
          const float v = to_f32(p.v[k]);
          ss = fmaf(v, v, ss);
        }
      }
    } else {
      for (long long j = t; j < cols; j += g.kThreads) {
        const float v = to_f32(x[j]);
        ss = fmaf(v, v, ss);
      }
    }
    const float r = rsqrtf(g.sum(ss, smem) / (float)cols + AK_RMS_EPS);
    if (vec) {
      for (long long i = t; i < npacks; i += g.kThreads) {
        const pack_t p = ((const pack_t*)x)[i];
        const pack_t q = ((const pack_t*)W)[i];
        pack_t o;
#pragma unroll
        for (int k = 0; k < AK_PACK; ++k) o.v[k] = from_f32(to_f32(p.v[k]) * r * to_f32(q.v[k]));
        ((pack_t*)y)[i] = o;
      }
    } else {
      for (long long j = t; j < cols; j += g.kThreads) y[j] = from_f32(to_f32(x[j]) * r * to_f32(W[j]));
    }
  }
}
