// Row-wise reduction over the last dimension (sum, or max with AK_REDUCE_MAX=1), CPU starter
// candidate.
//
// Contract (kernels/reduce/spec.cc): extern "C" int ak_reduce_cpu(const void* in, void* out,
// int64_t rows, int64_t cols, int dtype): in [rows, cols], out [rows], same dtype (0 fp32,
// 1 fp16 bits, 2 bf16 bits); returns 0 on success. Single-threaded. Sums accumulate in double
// per lane, so a 64k-wide fp32 row stays far inside the fp32 tolerance; max keeps NaN.
//
// Tunables:
//   AK_VEC  independent lanes per row (1, 4, 8, 16), combined at the end of the row
#include <cstdint>
#include <cstring>

#ifndef AK_VEC
#define AK_VEC 8
#endif
#ifndef AK_REDUCE_MAX
#define AK_REDUCE_MAX 0
#endif

namespace {

#include "../common/elem_cpu.h"

#if AK_REDUCE_MAX
using acc_t = float;
constexpr acc_t kIdentity = -__builtin_huge_valf();
inline acc_t op(acc_t a, acc_t b) { return (a > b || a != a) ? a : b; }  // keeps NaN
#else
using acc_t = double;
constexpr acc_t kIdentity = 0.0;
inline acc_t op(acc_t a, acc_t b) { return a + b; }
#endif

constexpr int V = AK_VEC;

template <class IO>
void reduce(const void* in, void* out, int64_t rows, int64_t cols) {
  const auto* x = static_cast<const typename IO::T*>(in);
  auto* y = static_cast<typename IO::T*>(out);
  const int64_t body = cols - cols % V;
  for (int64_t r = 0; r < rows; ++r) {
    const typename IO::T* xr = x + r * cols;
    acc_t lane[V];
    for (int l = 0; l < V; ++l) lane[l] = kIdentity;
    for (int64_t j = 0; j < body; j += V)
      for (int l = 0; l < V; ++l) lane[l] = op(lane[l], acc_t(IO::load(xr + j + l)));
    acc_t acc = kIdentity;
    for (int l = 0; l < V; ++l) acc = op(acc, lane[l]);
    for (int64_t j = body; j < cols; ++j) acc = op(acc, acc_t(IO::load(xr + j)));
    IO::store(y + r, float(acc));
  }
}

}  // namespace

extern "C" int ak_reduce_cpu(const void* in, void* out, int64_t rows, int64_t cols, int dtype) {
  if (!in || !out || rows < 1 || cols < 1) return 1;
  switch (dtype) {
    case 0: reduce<F32>(in, out, rows, cols); return 0;
    case 1: reduce<F16>(in, out, rows, cols); return 0;
    case 2: reduce<BF16>(in, out, rows, cols); return 0;
    default: return 2;
  }
}
