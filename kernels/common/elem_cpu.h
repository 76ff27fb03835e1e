// Element types of a kernel type's CPU sources: IEEE half and bfloat16 <-> float conversions
// (exact, branch-free so that lane loops vectorise) and the load/store policies F32, F16, BF16.
// Included inside the source's anonymous namespace, after <cstdint> and <cstring>, with a quoted
// #include that kernels/embed.cmake replaces by this text: every starter a candidate starts from
// is one self-contained source.
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

// IEEE half -> float, exact (normals, subnormals, inf, NaN). Branch-free so that lane loops
// vectorise (F. Giesen, "half_to_float_fast5").
inline float half_to_float(uint16_t h) {
  uint32_t em = uint32_t(h & 0x7fffu) << 13;
  float f = bits_to_float(em) * bits_to_float(uint32_t(254 - 15) << 23);  // rebias; subnormals exact
  uint32_t u = float_to_bits(f);
  u = f >= bits_to_float(uint32_t(127 + 16) << 23) ? (u | 0x7f800000u) : u;  // inf/NaN survive
  return bits_to_float(u | (uint32_t(h & 0x8000u) << 16));
}

// float -> IEEE half, round to nearest even; both paths computed and selected (branch-free).
inline uint16_t float_to_half(float f) {
  uint32_t u = float_to_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  // subnormal half (|f| < 2^-14): add 0.5 so that float rounding performs the half rounding
  uint32_t sub = float_to_bits(bits_to_float(a) + 0.5f) - 0x3f000000u;
  // normal: rebias the exponent (-112 << 23) and round to nearest even
  uint32_t norm = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;
  uint32_t big = a > 0x7f800000u ? 0x7e00u : 0x7c00u;  // NaN -> quiet NaN; inf and overflow -> inf
  uint32_t r = a >= 0x47800000u ? big : (a < 0x38800000u ? sub : norm);
  return uint16_t(sign | r);
}

inline float bf16_to_float(uint16_t h) { return bits_to_float(uint32_t(h) << 16); }

inline uint16_t float_to_bf16(float f) {
  uint32_t u = float_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

struct F32 {
  using T = float;
  static float load(const T* p) { return *p; }
  static void store(T* p, float v) { *p = v; }
};
struct F16 {
  using T = uint16_t;
  static float load(const T* p) { return half_to_float(*p); }
  static void store(T* p, float v) { *p = float_to_half(v); }
};
struct BF16 {
  using T = uint16_t;
  static float load(const T* p) { return bf16_to_float(*p); }
  static void store(T* p, float v) { *p = float_to_bf16(v); }
};
