// Matrix product C = A @ B, CPU starter candidate.
//
// Contract (kernels/matmul/spec.cc): extern "C" int ak_matmul_cpu(const void* a, const void* b,
// void* c, int64_t M, int64_t N, int64_t K, int dtype): A [M, K], B [K, N], C [M, N], row-major,
// one dtype (0 fp32, 1 fp16 bits, 2 bf16 bits); fp32 accumulation in ascending k, C rounded once.
// Returns 0 on success. Single-threaded.
//
// Blocked: for each AK_BM x AK_BN tile of C, the accumulators stay in a local tile while K is
// walked in steps of AK_BK; each step converts its AK_BK x AK_BN panel of B to float once, and
// the innermost loop runs along a row of the panel (contiguous: it vectorises).
//
// Tunables:
//   AK_BM  rows of a C tile (8, 32, 64)
//   AK_BN  columns of a C tile (64, 128, 256)
//   AK_BK  K step (32, 128, 256)
#include <cstdint>
#include <cstring>

#ifndef AK_BM
#define AK_BM 32
#endif
#ifndef AK_BN
#define AK_BN 128
#endif
#ifndef AK_BK
#define AK_BK 128
#endif

namespace {

#include "../common/elem_cpu.h"

template <class IO>
void matmul(const void* ain, const void* bin, void* cout, int64_t M, int64_t N, int64_t K) {
  const auto* a = static_cast<const typename IO::T*>(ain);
  const auto* b = static_cast<const typename IO::T*>(bin);
  auto* c = static_cast<typename IO::T*>(cout);
  static thread_local float acc[AK_BM][AK_BN];
  static thread_local float panel[AK_BK][AK_BN];
  for (int64_t i0 = 0; i0 < M; i0 += AK_BM) {
    const int64_t mi = M - i0 < AK_BM ? M - i0 : AK_BM;
    for (int64_t j0 = 0; j0 < N; j0 += AK_BN) {
      const int64_t nj = N - j0 < AK_BN ? N - j0 : AK_BN;
      for (int64_t i = 0; i < mi; ++i)
        for (int64_t j = 0; j < AK_BN; ++j) acc[i][j] = 0.0f;
      for (int64_t k0 = 0; k0 < K; k0 += AK_BK) {
        const int64_t nk = K - k0 < AK_BK ? K - k0 : AK_BK;
        for (int64_t k = 0; k < nk; ++k) {
          const typename IO::T* br = b + (k0 + k) * N + j0;
          for (int64_t j = 0; j < nj; ++j) panel[k][j] = IO::load(br + j);
          for (int64_t j = nj; j < AK_BN; ++j) panel[k][j] = 0.0f;
        }
        for (int64_t i = 0; i < mi; ++i) {
          const typename IO::T* ar = a + (i0 + i) * K + k0;
          float* ci = acc[i];
          for (int64_t k = 0; k < nk; ++k) {
            const float av = IO::load(ar + k);
            const float* pk = panel[k];
            for (int64_t j = 0; j < AK_BN; ++j) ci[j] += av * pk[j];
          }
        }
      }
      for (int64_t i = 0; i < mi; ++i)
        for (int64_t j = 0; j < nj; ++j) IO::store(c + (i0 + i) * N + j0 + j, acc[i][j]);
    }
  }
}

}  // namespace

extern "C" int ak_matmul_cpu(const void* a, const void* b, void* c, int64_t M, int64_t N, int64_t K, int dtype) {
  if (!a || !b || !c || M < 1 || N < 1 || K < 1) return 1;
  switch (dtype) {
    case 0: matmul<F32>(a, b, c, M, N, K); return 0;
    case 1: matmul<F16>(a, b, c, M, N, K); return 0;
    case 2: matmul<BF16>(a, b, c, M, N, K); return 0;
    default: return 2;
  }
}
