// A CPU softmax candidate whose speed is a known function of its three tunables: the search
// space of the farm's study tests (tests/integration/study_test.cc), whose exhaustive best is
// known by construction and checked by an exhaustive study on the farm.
//
// Contract (kernels/softmax/spec.cc): extern "C" int ak_softmax_cpu(const void* in, void* out,
// int64_t rows, int64_t cols, int dtype); fp32 only (the tests tune fp32). The softmax itself is
// exact enough for every verification stage; after it, each call spins for cost(AK_A, AK_B,
// AK_C) units of a fixed loop, so the measured latency follows the cost:
//   cost = 100 + 6 (a-5)^2 + 6 (b-2)^2 + 10 (c-1)^2 + 4 |a-b-3| + 3 ((7a + 13b + 29c) mod 5)
// over a in 0..7, b in 0..7, c in 0..3 (256 points). Its unique minimum, 100, is at a=5, b=2,
// c=1; every other point costs at least 112 (12% more), so timing noise of a few percent cannot
// change which point is best. The mod-5 term makes the surface rugged (not separable).
#include <cmath>
#include <cstdint>

#ifndef AK_A
#define AK_A 0
#endif
#ifndef AK_B
#define AK_B 0
#endif
#ifndef AK_C
#define AK_C 0
#endif

namespace {

constexpr int64_t sq(int64_t x) { return x * x; }
constexpr int64_t abs64(int64_t x) { return x < 0 ? -x : x; }
constexpr int64_t kCost = 100 + 6 * sq(AK_A - 5) + 6 * sq(AK_B - 2) + 10 * sq(AK_C - 1) + 4 * abs64(AK_A - AK_B - 3) +
                          3 * ((7 * AK_A + 13 * AK_B + 29 * AK_C) % 5);
// Loop iterations per cost unit (about 2 us of one core).
constexpr int64_t kIterationsPerUnit = 1500;

volatile uint64_t sink;

}  // namespace

extern "C" int ak_softmax_cpu(const void* in, void* out, int64_t rows, int64_t cols, int dtype) {
  if (!in || !out || rows < 1 || cols < 1) return 1;
  if (dtype != 0) return 2;
  const float* x = static_cast<const float*>(in);
  float* y = static_cast<float*>(out);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    float m = -INFINITY;
    for (int64_t j = 0; j < cols; ++j) m = std::fmax(m, xr[j]);
    double sum = 0.0;
    for (int64_t j = 0; j < cols; ++j) sum += std::exp(double(xr[j]) - m);
    const double inv = 1.0 / sum;
    for (int64_t j = 0; j < cols; ++j) yr[j] = float(std::exp(double(xr[j]) - m) * inv);
  }
  uint64_t acc = sink;
  for (int64_t i = 0; i < kCost * kIterationsPerUnit; ++i) acc = acc * 6364136223846793005ull + 1442695040888963407ull;
  sink = acc;
  return 0;
}
