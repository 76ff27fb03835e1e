// RMS normalisation over the last dimension, CPU starter candidate.
//
// Contract (kernels/rmsnorm/spec.cc): extern "C" int ak_rmsnorm_cpu(const void* x, const void* w,
// void* y, int64_t rows, int64_t cols, int dtype): x, y [rows, cols], w [cols], one dtype (0 fp32,
// 1 fp16 bits, 2 bf16 bits); y = x * rsqrt(mean(x^2) + 1e-6) * w; returns 0 on success.
// Single-threaded. The sum of squares accumulates in double per lane.
//
// Tunables:
//   AK_VEC  independent lanes per row (1, 4, 8, 16), combined at the end of the row
#include <cmath>
#include <cstdint>
#include <cstring>

#ifndef AK_VEC
#define AK_VEC 8
#endif

namespace {

#include "../common/elem_cpu.h"

constexpr int V = AK_VEC;
constexpr double kEps = 1e-6;

template <class IO>
void rmsnorm(const void* xin, const void* win, void* yout, int64_t rows, int64_t cols) {
  const auto* x = static_cast<const typename IO::T*>(xin);
  const auto* w = static_cast<const typename IO::T*>(win);
  auto* y = static_cast<typename IO::T*>(yout);
  const int64_t body = cols - cols % V;
  for (int64_t r = 0; r < rows; ++r) {
    const typename IO::T* xr = x + r * cols;
    typename IO::T* yr = y + r * cols;
    double lane[V] = {};
    for (int64_t j = 0; j < body; j += V)
      for (int l = 0; l < V; ++l) {
        const double v = IO::load(xr + j + l);
        lane[l] += v * v;
      }
    double ss = 0;
    for (int l = 0; l < V; ++l) ss += lane[l];
    for (int64_t j = body; j < cols; ++j) {
      const double v = IO::load(xr + j);
      ss += v * v;
    }
    const float rs = float(1.0 / std::sqrt(ss / double(cols) + kEps));
    for (int64_t j = 0; j < cols; ++j) IO::store(yr + j, IO::load(xr + j) * rs * IO::load(w + j));
  }
}

}  // namespace

extern "C" int ak_rmsnorm_cpu(const void* x, const void* w, void* y, int64_t rows, int64_t cols, int dtype) {
  if (!x || !w || !y || rows < 1 || cols < 1) return 1;
  switch (dtype) {
    case 0: rmsnorm<F32>(x, w, y, rows, cols); return 0;
    case 1: rmsnorm<F16>(x, w, y, rows, cols); return 0;
    case 2: rmsnorm<BF16>(x, w, y, rows, cols); return 0;
    default: return 2;
  }
}
