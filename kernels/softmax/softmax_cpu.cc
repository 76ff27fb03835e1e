// Row-wise softmax over the last dimension, CPU starter candidate.
//
// Contract (kernels/softmax/spec.cc): extern "C" int ak_softmax_cpu(const void* in, void* out,
// int64_t rows, int64_t cols, int dtype), dtype 0 fp32, 1 fp16 (IEEE half bits), 2 bf16 bits;
// returns 0 on success. Single-threaded; fp32 arithmetic, with the row sums folded into double
// every 512 columns (a serial fp32 sum over a 64k-wide row drifts by ~1e-4 relative, beyond the
// fp32 tolerance; the online variant keeps its running sum in double); max-subtracted for
// stability. -inf elements give 0, +inf or NaN make the row NaN,
// as in PyTorch.
//
// Tunables (passed as -D<NAME>=<value>):
//   AK_VEC            independent lanes per row (1, 4, 8, 16): the inner loops run over fixed-size
//                     lane arrays so the compiler can keep them in vector registers.
//   AK_ONLINE         0: three passes (max, sum of exp, write); 1: one online pass keeping a running
//                     max and a rescaled sum per lane (Milakov & Gimelshein 2018), then write.
//   AK_ROWS_PER_TILE  rows processed together (1, 2, 4): their lane loops interleave, giving more
//                     independent work per element position.
#include <cstdint>
#include <cstring>

#ifndef AK_VEC
#define AK_VEC 8
#endif
#ifndef AK_ONLINE
#define AK_ONLINE 0
#endif
#ifndef AK_ROWS_PER_TILE
#define AK_ROWS_PER_TILE 1
#endif

namespace {

#include "../common/elem_cpu.h"

// exp(x) for x <= 0 (arguments are max-subtracted), branch-free so that lane loops vectorise.
// Cephes expf: x = n ln2 + r with |r| <= ln2/2, degree-6 polynomial; about 1 ulp.
inline float fast_exp(float x) {
  const float lo = -87.0f;
  float xc = x < lo ? lo : x;
  float t = xc * 1.44269504088896341f;
  // round to nearest via the 1.5 * 2^23 trick (valid for |t| < 2^22)
  float n = (t + 12582912.0f) - 12582912.0f;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float z = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * z + r + 1.0f;
  int32_t e = int32_t(n) + 127;
  float scale = bits_to_float(uint32_t(e) << 23);
  float y = p * scale;
  return x < lo ? 0.0f : y;
}

constexpr int V = AK_VEC;
constexpr int R = AK_ROWS_PER_TILE;
constexpr int64_t kSumBlock = 512;  // a multiple of every AK_VEC
constexpr float kNegInf = -__builtin_huge_valf();

// One online-softmax step: running max m and sum s of exp(x - m), updated with value v. Selects,
// not branches, so lane loops vectorise. A -inf value adds 0 (also while m is still -inf, where
// exp(-inf - -inf) would be NaN); NaN and +inf make s NaN.
inline void online_step(float& m, double& s, float v) {
  const float nm = v > m ? v : m;
  const float scale = m == nm ? 1.0f : fast_exp(m - nm);
  const float e = v == kNegInf ? 0.0f : fast_exp(v - nm);
  s = s * double(scale) + double(e);
  m = nm;
}

// Softmax of `nr` (<= R) rows starting at x (row stride = cols). Per-row statistics are kept
// per lane and combined after the sweep.
template <class IO, int NR>
void rows_softmax(const typename IO::T* x, typename IO::T* y, int64_t cols) {
  float m[NR][V];
  double s[NR][V];
  for (int r = 0; r < NR; ++r)
    for (int l = 0; l < V; ++l) {
      m[r][l] = kNegInf;
      s[r][l] = 0.0;
    }
  const int64_t body = cols - cols % V;

#if AK_ONLINE
  for (int64_t j = 0; j < body; j += V)
    for (int r = 0; r < NR; ++r) {
      const typename IO::T* xr = x + r * cols + j;
      for (int l = 0; l < V; ++l) online_step(m[r][l], s[r][l], IO::load(xr + l));
    }
  for (int r = 0; r < NR; ++r)
    for (int64_t j = body; j < cols; ++j) online_step(m[r][0], s[r][0], IO::load(x + r * cols + j));
  float row_max[NR], row_inv[NR];
  for (int r = 0; r < NR; ++r) {
    float mx = m[r][0];
    for (int l = 1; l < V; ++l) mx = m[r][l] > mx ? m[r][l] : mx;
    double sum = 0.0;
    for (int l = 0; l < V; ++l) sum += s[r][l] * double(m[r][l] == mx ? 1.0f : fast_exp(m[r][l] - mx));
    row_max[r] = mx;
    row_inv[r] = float(1.0 / sum);
  }
#else
  for (int64_t j = 0; j < body; j += V)
    for (int r = 0; r < NR; ++r) {
      const typename IO::T* xr = x + r * cols + j;
      for (int l = 0; l < V; ++l) {
        float v = IO::load(xr + l);
        m[r][l] = v > m[r][l] ? v : m[r][l];
      }
    }
  float row_max[NR], row_inv[NR];
  for (int r = 0; r < NR; ++r) {
    float mx = m[r][0];
    for (int l = 1; l < V; ++l) mx = m[r][l] > mx ? m[r][l] : mx;
    for (int64_t j = body; j < cols; ++j) {
      float v = IO::load(x + r * cols + j);
      mx = v > mx ? v : mx;
    }
    row_max[r] = mx;
  }
  // The sum pass runs in blocks: float lanes within a block (they vectorise), folded into the
  // double totals after it, so no float lane ever sums more than kSumBlock / V terms.
  for (int64_t j0 = 0; j0 < body; j0 += kSumBlock) {
    const int64_t j1 = j0 + kSumBlock < body ? j0 + kSumBlock : body;
    float part[NR][V];
    for (int r = 0; r < NR; ++r)
      for (int l = 0; l < V; ++l) part[r][l] = 0.0f;
    for (int64_t j = j0; j < j1; j += V)
      for (int r = 0; r < NR; ++r) {
        const typename IO::T* xr = x + r * cols + j;
        for (int l = 0; l < V; ++l) part[r][l] += fast_exp(IO::load(xr + l) - row_max[r]);
      }
    for (int r = 0; r < NR; ++r)
      for (int l = 0; l < V; ++l) s[r][l] += double(part[r][l]);
  }
  for (int r = 0; r < NR; ++r) {
    double sum = 0.0;
    for (int l = 0; l < V; ++l) sum += s[r][l];
    for (int64_t j = body; j < cols; ++j) sum += double(fast_exp(IO::load(x + r * cols + j) - row_max[r]));
    row_inv[r] = float(1.0 / sum);
  }
#endif

  for (int64_t j = 0; j < body; j += V)
    for (int r = 0; r < NR; ++r) {
      const typename IO::T* xr = x + r * cols + j;
      typename IO::T* yr = y + r * cols + j;
      for (int l = 0; l < V; ++l) IO::store(yr + l, fast_exp(IO::load(xr + l) - row_max[r]) * row_inv[r]);
    }
  for (int r = 0; r < NR; ++r)
    for (int64_t j = body; j < cols; ++j)
      IO::store(y + r * cols + j, fast_exp(IO::load(x + r * cols + j) - row_max[r]) * row_inv[r]);
}

template <class IO>
void softmax(const void* in, void* out, int64_t rows, int64_t cols) {
  const auto* x = static_cast<const typename IO::T*>(in);
  auto* y = static_cast<typename IO::T*>(out);
  int64_t row = 0;
  for (; row + R <= rows; row += R) rows_softmax<IO, R>(x + row * cols, y + row * cols, cols);
  for (; row < rows; ++row) rows_softmax<IO, 1>(x + row * cols, y + row * cols, cols);
}

}  // namespace

extern "C" int ak_softmax_cpu(const void* in, void* out, int64_t rows, int64_t cols, int dtype) {
  if (!in || !out || rows < 1 || cols < 1) return 1;
  switch (dtype) {
    case 0: softmax<F32>(in, out, rows, cols); return 0;
    case 1: softmax<F16>(in, out, rows, cols); return 0;
    case 2: softmax<BF16>(in, out, rows, cols); return 0;
    default: return 2;
  }
}
