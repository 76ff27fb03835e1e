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

inline float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// IEEE half <-> float (normals, subnormals, inf, NaN), round to nearest even.
inline float half_to_float(uint16_t h) {
  uint32_t em = uint32_t(h & 0x7fffu) << 13;
  float f = bits_to_float(em) * bits_to_float(uint32_t(254 - 15) << 23);
  uint32_t u = float_to_bits(f);
  u = f >= bits_to_float(uint32_t(127 + 16) << 23) ? (u | 0x7f800000u) : u;
  return bits_to_float(u | (uint32_t(h & 0x8000u) << 16));
}
inline uint16_t float_to_half(float f) {
  uint32_t u = float_to_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  uint32_t sub = float_to_bits(bits_to_float(a) + 0.5f) - 0x3f000000u;
  uint32_t norm = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;
  uint32_t big = a > 0x7f800000u ? 0x7e00u : 0x7c00u;
  uint32_t r = a >= 0x47800000u ? big : (a < 0x38800000u ? sub : norm);
  return uint16_t(sign | r);
}
inline float bf16_to_float(uint16_t h) { return bits_to_float(uint32_t(h) << 16); }
inline uint16_t float_to_bf16(float f) {
  uint32_t u = float_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

struct F32 {
  using T = float;
  static float load(const T* p) { return *p; }
  static void store(T* p, double v) { *p = float(v); }
};
struct F16 {
  using T = uint16_t;
  static float load(const T* p) { return half_to_float(*p); }
  static void store(T* p, double v) { *p = float_to_half(float(v)); }
};
struct BF16 {
  using T = uint16_t;
  static float load(const T* p) { return bf16_to_float(*p); }
  static void store(T* p, double v) { *p = float_to_bf16(float(v)); }
};

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
    IO::store(y + r, double(acc));
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
