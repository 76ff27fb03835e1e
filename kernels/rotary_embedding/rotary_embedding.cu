// Rotary position embedding (the rotate-half convention of GPT-NeoX and LLaMA), CUDA starter
// candidate (compiled by NVRTC: device code only, no includes of the toolkit).
//
// Contract (kernels/rotary_embedding/spec.cc):
//   extern "C" __global__ void ak_rotary_embedding(const void* x, const void* cos, const void* sin,
//                                                  void* y, long long tokens, long long heads,
//                                                  long long dim)
//   x, y: [tokens, heads, dim]; cos, sin: [tokens, dim / 2]; one dtype (-DAK_DTYPE=0|1|2). With
//   h = dim / 2, x1 = x[..., :h], x2 = x[..., h:] and c, s the token's tables:
//   y[..., :h] = x1 * c - x2 * s, y[..., h:] = x2 * c + x1 * s, in fp32, rounded once.
//   Launched with block = AK_THREADS and grid = ceil(tokens * heads * h / (AK_THREADS * AK_VEC)),
//   capped at 2^31 - 1 (a grid-stride loop covers the rest).
//
// Tunables:
//   AK_THREADS  threads per block (128, 256, 512, 1024)
//   AK_VEC      pairs per thread and step (1, 2, 4, 8): one pack of x1, of x2, of c and of s when h
//               is a multiple of the pack and every pointer is aligned to it; otherwise scalar

#ifndef AK_THREADS
#define AK_THREADS 256
#endif
#ifndef AK_VEC
#define AK_VEC 8
#endif
#define AK_WARP_PER_ROW 0

#include "../common/elem.cuh"
#include "../common/row.cuh"

__device__ __forceinline__ void rotate(float a, float b, float c, float s, elem_t& ya, elem_t& yb) {
  ya = from_f32(fmaf(a, c, -b * s));
  yb = from_f32(fmaf(b, c, a * s));
}

extern "C" __global__ void __launch_bounds__(AK_THREADS)
ak_rotary_embedding(const void* x_, const void* cos_, const void* sin_, void* y_, long long tokens, long long heads,
                    long long dim) {
  const elem_t* __restrict__ X = (const elem_t*)x_;
  const elem_t* __restrict__ C = (const elem_t*)cos_;
  const elem_t* __restrict__ S = (const elem_t*)sin_;
  elem_t* __restrict__ Y = (elem_t*)y_;
  const long long h = dim / 2;
  const long long rows = tokens * heads;  // one row = one (token, head)
  const bool vec = h % AK_PACK == 0 && pack_aligned(X) && pack_aligned(C) && pack_aligned(S) && pack_aligned(Y);
  const long long step = vec ? AK_PACK : 1;
  const long long per_row = h / step;  // work items per row
  const long long n = rows * per_row;
  for (long long i = (long long)blockIdx.x * AK_THREADS + threadIdx.x; i < n; i += (long long)gridDim.x * AK_THREADS) {
    const long long row = i / per_row;
    const long long j = (i - row * per_row) * step;  // first pair of this item
    const long long token = row / heads;
    const elem_t* x = X + row * dim;
    elem_t* y = Y + row * dim;
    const elem_t* c = C + token * h;
    const elem_t* s = S + token * h;
    if (vec) {
      const pack_t a = *(const pack_t*)(x + j), b = *(const pack_t*)(x + h + j);
      const pack_t pc = *(const pack_t*)(c + j), ps = *(const pack_t*)(s + j);
      pack_t ya, yb;
#pragma unroll
      for (int k = 0; k < AK_PACK; ++k)
        rotate(to_f32(a.v[k]), to_f32(b.v[k]), to_f32(pc.v[k]), to_f32(ps.v[k]), ya.v[k], yb.v[k]);
      *(pack_t*)(y + j) = ya;
      *(pack_t*)(y + h + j) = yb;
    } else {
      rotate(to_f32(x[j]), to_f32(x[h + j]), to_f32(c[j]), to_f32(s[j]), y[j], y[h + j]);
    }
  }
}
