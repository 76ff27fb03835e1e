// Cross-entropy loss per row of logits, CPU starter candidate.
//
// Contract (kernels/cross_entropy/spec.cc): extern "C" int ak_cross_entropy_cpu(const void* logits,
// const int64_t* targets, void* loss, int64_t rows, int64_t cols, int dtype): logits
// [rows, cols] (0 fp32, 1 fp16 bits, 2 bf16 bits), targets [rows] in [0, cols), loss [rows] in the
// logits' dtype; loss[r] = logsumexp(x[r, :]) - x[r, t[r]]. Returns 0 on success, 3 for a target
// out of range. Single-threaded: the row maximum, then the sum of exp(x - max) in double lanes.
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

inline float nan_max(float a, float b) { return (a > b || a != a) ? a : b; }

template <class IO>
int cross_entropy(const void* in, const int64_t* targets, void* out, int64_t rows, int64_t cols) {
  const auto* x = static_cast<const typename IO::T*>(in);
  auto* y = static_cast<typename IO::T*>(out);
  const int64_t body = cols - cols % V;
  for (int64_t r = 0; r < rows; ++r) {
    const typename IO::T* xr = x + r * cols;
    const int64_t t = targets[r];
    if (t < 0 || t >= cols) return 3;
    float lane_max[V];
    for (int l = 0; l < V; ++l) lane_max[l] = -__builtin_huge_valf();
    for (int64_t j = 0; j < body; j += V)
      for (int l = 0; l < V; ++l) lane_max[l] = nan_max(lane_max[l], IO::load(xr + j + l));
    float m = -__builtin_huge_valf();
    for (int l = 0; l < V; ++l) m = nan_max(m, lane_max[l]);
    for (int64_t j = body; j < cols; ++j) m = nan_max(m, IO::load(xr + j));
    // exp(x - m): 0 for -inf, NaN for +inf - +inf and for NaN, as in PyTorch's log_softmax
    double lane[V] = {};
    for (int64_t j = 0; j < body; j += V)
      for (int l = 0; l < V; ++l) lane[l] += std::exp(double(IO::load(xr + j + l)) - double(m));
    double s = 0;
    for (int l = 0; l < V; ++l) s += lane[l];
    for (int64_t j = body; j < cols; ++j) s += std::exp(double(IO::load(xr + j)) - double(m));
    IO::store(y + r, float(std::log(s) - (double(IO::load(xr + t)) - double(m))));
  }
  return 0;
}

}  // namespace

extern "C" int ak_cross_entropy_cpu(const void* logits, const int64_t* targets, void* loss, int64_t rows,
                                    int64_t cols, int dtype) {
  if (!logits || !targets || !loss || rows < 1 || cols < 1) return 1;
  switch (dtype) {
    case 0: return cross_entropy<F32>(logits, targets, loss, rows, cols);
    case 1: return cross_entropy<F16>(logits, targets, loss, rows, cols);
    case 2: return cross_entropy<BF16>(logits, targets, loss, rows, cols);
    default: return 2;
  }
}
