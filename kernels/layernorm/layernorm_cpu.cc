// Layer normalisation over the last dimension with weight and bias, CPU starter candidate.
//
// Contract (kernels/layernorm/spec.cc): extern "C" int ak_layernorm_cpu(const void* x,
// const void* w, const void* b, void* y, int64_t rows, int64_t cols, int dtype): x, y
// [rows, cols], w, b [cols], one dtype (0 fp32, 1 fp16 bits, 2 bf16 bits);
// y = (x - mean) * rsqrt(var + 1e-5) * w + b with the biased variance; returns 0 on success.
// Single-threaded. Mean, then variance as the mean of (x - mean)^2, both in double per lane.
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
constexpr double kEps = 1e-5;

// sum over the row of f(x[j]) in V double lanes
template <class IO, class F>
double row_sum(const typename IO::T* xr, int64_t cols, F f) {
  const int64_t body = cols - cols % V;
  double lane[V] = {};
  for (int64_t j = 0; j < body; j += V)
    for (int l = 0; l < V; ++l) lane[l] += f(double(IO::load(xr + j + l)));
  double s = 0;
  for (int l = 0; l < V; ++l) s += lane[l];
  for (int64_t j = body; j < cols; ++j) s += f(double(IO::load(xr + j)));
  return s;
}

template <class IO>
void layernorm(const void* xin, const void* win, const void* bin, void* yout, int64_t rows, int64_t cols) {
  const auto* x = static_cast<const typename IO::T*>(xin);
  const auto* w = static_cast<const typename IO::T*>(win);
  const auto* b = static_cast<const typename IO::T*>(bin);
  auto* y = static_cast<typename IO::T*>(yout);
  for (int64_t r = 0; r < rows; ++r) {
    const typename IO::T* xr = x + r * cols;
    typename IO::T* yr = y + r * cols;
    const double mean = row_sum<IO>(xr, cols, [](double v) { return v; }) / double(cols);
    const double var = row_sum<IO>(xr, cols, [mean](double v) { return (v - mean) * (v - mean); }) / double(cols);
    const float rs = float(1.0 / std::sqrt(var + kEps));
    const float m = float(mean);
    for (int64_t j = 0; j < cols; ++j)
      IO::store(yr + j, (IO::load(xr + j) - m) * rs * IO::load(w + j) + IO::load(b + j));
  }
}

}  // namespace

extern "C" int ak_layernorm_cpu(const void* x, const void* w, const void* b, void* y, int64_t rows, int64_t cols,
                                int dtype) {
  if (!x || !w || !b || !y || rows < 1 || cols < 1) return 1;
  switch (dtype) {
    case 0: layernorm<F32>(x, w, b, y, rows, cols); return 0;
    case 1: layernorm<F16>(x, w, b, y, rows, cols); return 0;
    case 2: layernorm<BF16>(x, w, b, y, rows, cols); return 0;
    default: return 2;
  }
}
