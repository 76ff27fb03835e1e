// Row-wise softmax over the last dimension: a plain custom CPU candidate, submitted by
// custom_candidate.toml through `source_file`.
//
// Contract (kernels/softmax/spec.cc): extern "C" int ak_softmax_cpu(const void* in, void* out,
// int64_t rows, int64_t cols, int dtype), dtype 0 fp32, 1 fp16 (IEEE half bits), 2 bf16 bits;
// returns 0 on success. Single-threaded, three passes per row (max, sum of exp, write), exp and
// sum in double so the only rounding that matters is the final one to the output dtype.
// It reads none of the starter's tunables, so a campaign for it uses `configs = "default"`.
#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
uint32_t to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// IEEE half -> float, exact: sign, 5-bit exponent (bias 15), 10-bit mantissa.
float half_to_float(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  float v;
  if (exponent == 0x1f)
    v = mantissa ? std::nanf("") : INFINITY;
  else if (exponent == 0)
    v = std::ldexp(float(mantissa), -24);  // zero or subnormal
  else
    v = std::ldexp(float(mantissa + 1024), exponent - 25);
  return (h & 0x8000) ? -v : v;
}

// float -> IEEE half, round to nearest even; overflow to inf, NaN stays NaN.
uint16_t float_to_half(float f) {
  const uint16_t sign = (to_bits(f) >> 16) & 0x8000;
  const float a = std::fabs(f);
  if (std::isnan(a)) return sign | 0x7e00;
  if (a >= 65520.0f) return sign | 0x7c00;  // 65520 and above round to inf
  if (a < std::ldexp(1.0f, -14)) {
    // subnormal half: units of 2^-24; nearbyint rounds half to even in the default mode
    return sign | uint16_t(std::nearbyint(std::ldexp(a, 24)));
  }
  int e;
  const float m = std::frexp(a, &e);            // a = m * 2^e, m in [0.5, 1)
  float q = std::nearbyint(std::ldexp(m, 11));  // 11 significant bits, in [1024, 2048]
  if (q == 2048.0f) {
    q = 1024.0f;
    ++e;
  }
  if (e + 14 >= 0x1f) return sign | 0x7c00;
  return sign | uint16_t((e + 14) << 10) | uint16_t(int(q) - 1024);
}

float bf16_to_float(uint16_t h) { return from_bits(uint32_t(h) << 16); }

// float -> bf16, round to nearest even on the upper 16 bits; NaN stays a quiet NaN.
uint16_t float_to_bf16(float f) {
  uint32_t u = to_bits(f);
  if (std::isnan(f)) return uint16_t((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1);
  return uint16_t(u >> 16);
}

struct F32 {
  using T = float;
  static float load(T v) { return v; }
  static T store(float v) { return v; }
};
struct F16 {
  using T = uint16_t;
  static float load(T v) { return half_to_float(v); }
  static T store(float v) { return float_to_half(v); }
};
struct BF16 {
  using T = uint16_t;
  static float load(T v) { return bf16_to_float(v); }
  static T store(float v) { return float_to_bf16(v); }
};

template <class IO>
void softmax(const void* in, void* out, int64_t rows, int64_t cols) {
  const auto* x = static_cast<const typename IO::T*>(in);
  auto* y = static_cast<typename IO::T*>(out);
  for (int64_t r = 0; r < rows; ++r) {
    const typename IO::T* xr = x + r * cols;
    typename IO::T* yr = y + r * cols;
    float row_max = -INFINITY;
    for (int64_t j = 0; j < cols; ++j) row_max = std::fmax(row_max, IO::load(xr[j]));
    double sum = 0.0;
    for (int64_t j = 0; j < cols; ++j) sum += std::exp(double(IO::load(xr[j])) - row_max);
    const double inv = 1.0 / sum;
    for (int64_t j = 0; j < cols; ++j) yr[j] = IO::store(float(std::exp(double(IO::load(xr[j])) - row_max) * inv));
  }
}

}  // namespace

extern "C" int ak_softmax_cpu(const void* in, void* out, int64_t rows, int64_t cols, int dtype) {
  if (!in || !out || rows < 1 || cols < 1) return 1;
  switch (dtype) {
    case 0:
      softmax<F32>(in, out, rows, cols);
      return 0;
    case 1:
      softmax<F16>(in, out, rows, cols);
      return 0;
    case 2:
      softmax<BF16>(in, out, rows, cols);
      return 0;
    default:
      return 2;
  }
}
