// Rotary position embedding (rotate-half convention), CPU starter candidate.
//
// Contract (kernels/rotary_embedding/spec.cc): extern "C" int ak_rotary_embedding_cpu(
// const void* x, const void* cos, const void* sin, void* y, int64_t tokens, int64_t heads,
// int64_t dim, int dtype): x, y [tokens, heads, dim], cos, sin [tokens, dim / 2], one dtype (0 fp32,
// 1 fp16 bits, 2 bf16 bits); y[..., :h] = x1 * c - x2 * s, y[..., h:] = x2 * c + x1 * s with
// h = dim / 2. Returns 0 on success, 3 for an odd dim. Single-threaded.
//
// Tunables:
//   AK_HEADS_PER_STEP  heads rotated per pass over a token's tables (1, 4, 8): the tables stay in
//                      registers or L1 for that many heads
#include <cmath>
#include <cstdint>
#include <cstring>

#ifndef AK_HEADS_PER_STEP
#define AK_HEADS_PER_STEP 4
#endif

namespace {

#include "../common/elem_cpu.h"

template <class IO>
void rotary(const void* xin, const void* cin, const void* sin_, void* yout, int64_t tokens, int64_t heads,
            int64_t dim) {
  const auto* x = static_cast<const typename IO::T*>(xin);
  const auto* c = static_cast<const typename IO::T*>(cin);
  const auto* s = static_cast<const typename IO::T*>(sin_);
  auto* y = static_cast<typename IO::T*>(yout);
  const int64_t h = dim / 2;
  for (int64_t t = 0; t < tokens; ++t) {
    const typename IO::T* ct = c + t * h;
    const typename IO::T* st = s + t * h;
    for (int64_t h0 = 0; h0 < heads; h0 += AK_HEADS_PER_STEP) {
      const int64_t h1 = h0 + AK_HEADS_PER_STEP < heads ? h0 + AK_HEADS_PER_STEP : heads;
      for (int64_t j = 0; j < h; ++j) {
        const float cj = IO::load(ct + j), sj = IO::load(st + j);
        for (int64_t hd = h0; hd < h1; ++hd) {
          const typename IO::T* xr = x + (t * heads + hd) * dim;
          typename IO::T* yr = y + (t * heads + hd) * dim;
          const float a = IO::load(xr + j), b = IO::load(xr + h + j);
          IO::store(yr + j, std::fma(a, cj, -b * sj));
          IO::store(yr + h + j, std::fma(b, cj, a * sj));
        }
      }
    }
  }
}

}  // namespace

extern "C" int ak_rotary_embedding_cpu(const void* x, const void* cos, const void* sin, void* y, int64_t tokens,
                                       int64_t heads, int64_t dim, int dtype) {
  if (!x || !cos || !sin || !y || tokens < 1 || heads < 1 || dim < 2) return 1;
  if (dim % 2 != 0) return 3;
  switch (dtype) {
    case 0: rotary<F32>(x, cos, sin, y, tokens, heads, dim); return 0;
    case 1: rotary<F16>(x, cos, sin, y, tokens, heads, dim); return 0;
    case 2: rotary<BF16>(x, cos, sin, y, tokens, heads, dim); return 0;
    default: return 2;
  }
}
