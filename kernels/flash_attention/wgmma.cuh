// The Hopper paths of flash_attention.cu (fp16/bf16, compiled for sm_90a with AK_WGMMA=1 to 4; 3 and
// 4 are wgmma_tma.cuh's, which reuses the products and the order of the AK_WGMMA=2 path below):
// both matrix products by warpgroup MMA (wgmma.mma_async). Included by flash_attention.cu for
// fp16/bf16, after the mma.sync helpers it shares (pack2, ex2, row_max, row_of, key_of,
// start_rows, store_rows, KvRing with layout 1); everything here is compiled only where
// AK_FA_WGMMA_ON is 1.
//
// Work split. Each warpgroup (4 warps) owns 64 query rows of the block's AK_BLOCK_M, warp w of
// it rows 16 w .. 16 w + 15, so AK_BLOCK_M / AK_WARPS must be 16. Per K/V tile:
//   S = Q K^T: head_dim / 16 wgmma m64 x nAK_BLOCK_N x k16, A = the warpgroup's 64 rows of the Q
//     tile and B = the K tile, both from shared memory and both K-major (head_dim contiguous).
//   The accumulators of m64nN have mma.sync's m16n8 layout per warp and n8 step (lane 4 g + t:
//     rows g and g + 8, columns 8 j + 2 t and 8 j + 2 t + 1), so the operand lists below hand
//     the instruction the thread's s[row][score] and o[row][column] arrays of the mma.sync path
//     in that order, and its masking, online softmax and store run unchanged.
//   O += P V: AK_BLOCK_N / 16 wgmma m64 x n(P) x k16 with A = P from registers (the S
//     accumulators of n8 steps 2 kk and 2 kk + 1, rounded and packed in pairs, are the A fragment
//     of keys 16 kk .. 16 kk + 15, as for mma.sync) and B = the V tile from shared memory,
//     MN-major (head_dim contiguous), which the instruction transposes.
// Shared memory. Q, K and V tiles share one layout, the hardware's 128-byte swizzle: a tile of R
// rows is split into blocks of 64 columns (128 bytes a row), block b holding its R rows one after
// the other; 16-byte chunk c of row r sits in block c / 8 at row r, chunk (c % 8) ^ (r % 8).
// Descriptors (PTX ISA, "matrix descriptor": start, leading and stride byte offsets in 16-byte
// units, swizzle mode 1 = 128B in bits 62-63):
//   Q and K (K-major): SBO = 8 rows (1024 bytes); k16 step kk starts in block kk / 4, 32 (kk % 4)
//     bytes in; LBO unused.
//   V (MN-major): LBO = one 64-column block (AK_BLOCK_N * 128 bytes), SBO = 8 rows; k16 step kk
//     (keys 16 kk ..) starts 16 kk rows down.
// Every tile and block is a multiple of 1024 bytes (the swizzle period) and the kernel rounds the
// dynamic shared memory's start up to 1024 bytes; the geometry grants the 1 KiB this may take.
// Pipeline: the cp.async rings, their order (K0 V0 K1 V1 ...) and the block barriers of the
// mma.sync path, each wait followed by a proxy fence (cp.async writes through the generic proxy,
// wgmma reads through the async one). Every wgmma group is waited for before its results are
// read, so the warpgroup runs the products and its softmax in turn; the block's warpgroups, and
// blocks sharing an SM, overlap each other's.
// Causal: a tile is skipped by a whole warpgroup (wgmma is warpgroup-wide) when all its keys
// follow the warpgroup's last query; a warp of an active warpgroup whose rows all precede the
// tile's keys masks all its scores, which leaves its running max, sum and output as they were.

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) && AK_WGMMA
#if AK_WARP_ROWS != 16
#error "AK_WGMMA=1 needs AK_BLOCK_M / AK_WARPS = 16 (one warpgroup per 64 query rows; so do AK_WGMMA=2, 3 and 4)"
#endif
#if AK_MIN_BLOCKS != 1
#error \
    "AK_WGMMA=1 to 4 need AK_MIN_BLOCKS = 1 (128 registers are too few for its accumulators: ptxas spills and serialises the wgmma)"
#endif
#if AK_WGMMA >= 2 && AK_STAGES != 2
#error "AK_WGMMA=2, 3 or 4 needs AK_STAGES = 2 (its copies run one tile ahead)"
#endif
#define AK_FA_WGMMA_ON 1
#else
#define AK_FA_WGMMA_ON 0
#endif

#if AK_FA_WGMMA_ON
#include "../common/wgmma.cuh"
#if AK_DTYPE == 1
#define AK_FA_TYPE "f16"
#else
#define AK_FA_TYPE "bf16"
#endif

// Operand lists: accumulators j .. j + 3 (n8 steps) of a [2][n] thread array in the instruction's
// order (row g: columns 2 t, 2 t + 1; row g + 8: the same), 16 values.
#define AK_FA_D4(a, j) "+f"(a[0][2 * (j)]), "+f"(a[0][2 * (j) + 1]), "+f"(a[1][2 * (j)]), "+f"(a[1][2 * (j) + 1])
#define AK_FA_D16(a, j) AK_FA_D4(a, j), AK_FA_D4(a, (j) + 1), AK_FA_D4(a, (j) + 2), AK_FA_D4(a, (j) + 3)
#define AK_FA_D32(a) AK_FA_D16(a, 0), AK_FA_D16(a, 4)
#define AK_FA_D64(a) AK_FA_D16(a, 0), AK_FA_D16(a, 4), AK_FA_D16(a, 8), AK_FA_D16(a, 12)
#define AK_FA_R0 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define AK_FA_R1 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define AK_FA_R2 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
#define AK_FA_R3 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define AK_FA_OP(n) "wgmma.mma_async.sync.aligned.m64n" #n "k16.f32." AK_FA_TYPE "." AK_FA_TYPE " "

// Keeps the compiler from moving accesses of the accumulators across the wgmma fences and waits.
template <int N>
__device__ __forceinline__ void fa_hold(float (&a)[2][N]) {
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int n = 0; n < N; ++n) asm volatile("" : "+f"(a[r][n])::"memory");
}

// s += A (desc qa) x B (desc kb), both K-major: scale-d from a predicate (1), no transposes.
#if AK_BLOCK_N == 32
__device__ __forceinline__ void fa_wgmma_s(float (&s)[2][8], unsigned long long qa, unsigned long long kb) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n" AK_FA_OP(32) "{" AK_FA_R0 "}, %16, %17, p, 1, 1, 0, 0;\n}\n"
               : AK_FA_D16(s, 0)
               : "l"(qa), "l"(kb), "r"(1)
               : "memory");
}
#elif AK_BLOCK_N == 64
__device__ __forceinline__ void fa_wgmma_s(float (&s)[2][16], unsigned long long qa, unsigned long long kb) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n" AK_FA_OP(64) "{" AK_FA_R0 ", " AK_FA_R1
                                                                         "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
               : AK_FA_D32(s)
               : "l"(qa), "l"(kb), "r"(1)
               : "memory");
}
#else
__device__ __forceinline__ void fa_wgmma_s(float (&s)[2][32], unsigned long long qa, unsigned long long kb) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n" AK_FA_OP(128) "{" AK_FA_R0 ", " AK_FA_R1 ", " AK_FA_R2
                                                                          ", " AK_FA_R3
                                                                          "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
               : AK_FA_D64(s)
               : "l"(qa), "l"(kb), "r"(1)
               : "memory");
}
#endif

// o += P (registers pa) x V (desc vb, MN-major: transposed), for a padded head_dim of 64 or 128.
__device__ __forceinline__ void fa_wgmma_o(float (&o)[2][16], const unsigned (&pa)[4], unsigned long long vb) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n" AK_FA_OP(
                   64) "{" AK_FA_R0 ", " AK_FA_R1 "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
               : AK_FA_D32(o)
               : "r"(pa[0]), "r"(pa[1]), "r"(pa[2]), "r"(pa[3]), "l"(vb), "r"(1)
               : "memory");
}
__device__ __forceinline__ void fa_wgmma_o(float (&o)[2][32], const unsigned (&pa)[4], unsigned long long vb) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n" AK_FA_OP(128) "{" AK_FA_R0 ", " AK_FA_R1 ", " AK_FA_R2 ", " AK_FA_R3
                                                                 "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : AK_FA_D64(o)
      : "r"(pa[0]), "r"(pa[1]), "r"(pa[2]), "r"(pa[3]), "l"(vb), "r"(1)
      : "memory");
}

// Issues (and commits as one group) s = Q K^T for the warpgroup's rows, q_rows its first row of
// the Q tile (block 0), sk the K buffer; s is zeroed first.
template <int P>
__device__ __forceinline__ void fa_issue_scores(float (&s)[AK_ROWS][AK_SCORES], unsigned q_rows, unsigned sk) {
  constexpr unsigned kQBlock = AK_BLOCK_M * 128;  // one 64-column block of the Q tile
  constexpr unsigned kKVBlock = AK_BLOCK_N * 128;
#pragma unroll
  for (int r = 0; r < AK_ROWS; ++r)
#pragma unroll
    for (int n = 0; n < AK_SCORES; ++n) s[r][n] = 0.0f;
  fa_hold(s);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < P / 16; ++kk) {
    const unsigned col = (unsigned)(kk & 3) * 32;  // k16 step kk % 4 of block kk / 4
    fa_wgmma_s(s, wg_desc(q_rows + (unsigned)(kk >> 2) * kQBlock + col, 16, 1024, 1),
               wg_desc(sk + (unsigned)(kk >> 2) * kKVBlock + col, 16, 1024, 1));
  }
  wgmma_commit();
}

// Issues (and commits as one group) o += P V, pa the A fragments of P, sv the V buffer.
template <int P>
__device__ __forceinline__ void fa_issue_pv(float (&o)[AK_ROWS][AK_OUTS(P)], const unsigned (&pa)[AK_BLOCK_N / 16][4],
                                            unsigned sv) {
  constexpr unsigned kKVBlock = AK_BLOCK_N * 128;
  fa_hold(o);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < AK_BLOCK_N / 16; ++kk)
    fa_wgmma_o(o, pa[kk], wg_desc(sv + (unsigned)kk * 16 * 128, kKVBlock, 1024, 1));
  wgmma_commit();
}

// The A fragments of P for keys 16 kk .. 16 kk + 15, as in tile_accumulate.
__device__ __forceinline__ void fa_pack(unsigned (&pa)[AK_BLOCK_N / 16][4], const float (&p)[AK_ROWS][AK_SCORES]) {
#pragma unroll
  for (int kk = 0; kk < AK_BLOCK_N / 16; ++kk) {
    pa[kk][0] = pack2(p[0][4 * kk], p[0][4 * kk + 1]);
    pa[kk][1] = pack2(p[1][4 * kk], p[1][4 * kk + 1]);
    pa[kk][2] = pack2(p[0][4 * kk + 2], p[0][4 * kk + 3]);
    pa[kk][3] = pack2(p[1][4 * kk + 2], p[1][4 * kk + 3]);
  }
}

// Keeps P's fragments alive in the registers the asynchronous P V product reads until it is waited for.
__device__ __forceinline__ void fa_hold_p(unsigned (&pa)[AK_BLOCK_N / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < AK_BLOCK_N / 16; ++kk)
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(pa[kk][i])::"memory");
}

// The K/V tiles a warpgroup (its first row wg_row0 of the query tile at q0) works on, of the
// block's tiles up to kv_end: causal, the tiles before the first whose keys all follow the
// warpgroup's last query; none for a warpgroup whose rows all lie past seq (the last query
// tile's), which stores nothing.
__device__ __forceinline__ int fa_wg_tiles(long long q0, int wg_row0, long long kv_end, long long seq) {
  const long long wg_end = AK_CAUSAL && q0 + wg_row0 + 64 < kv_end ? q0 + wg_row0 + 64 : kv_end;
  return q0 + wg_row0 >= seq ? 0 : (int)((wg_end + AK_BLOCK_N - 1) / AK_BLOCK_N);
}

// attend's work by wgmma; sbase is 1024-byte aligned.
template <int P>
__device__ __forceinline__ void attend_wgmma(const elem_t* __restrict__ Q, const elem_t* __restrict__ K,
                                             const elem_t* __restrict__ V, elem_t* __restrict__ O, long long seq, int d,
                                             long long q0, unsigned sbase) {
  constexpr unsigned kQBlock = AK_BLOCK_M * 128;              // one 64-column block of the Q tile
  constexpr unsigned kKVBytes = KvRing<P, 1>::kBytes;         // one K or V buffer
  const unsigned sq = sbase;
  const unsigned sk = sq + (P / 64) * kQBlock;
  const unsigned sv = sk + AK_STAGES * kKVBytes;
  const int lane = (int)threadIdx.x & 31;
  const int wr0 = ((int)threadIdx.x >> 5) * 16;           // the warp's first row in the tile
  const int wg_row0 = ((int)threadIdx.x >> 7) * 64;       // the warpgroup's
  const float c = 1.4426950408889634f / sqrtf((float)d);  // log2(e) / sqrt(d)

  const long long kv_end = AK_CAUSAL && q0 + AK_BLOCK_M < seq ? q0 + AK_BLOCK_M : seq;
  const int kv_tiles = (int)((kv_end + AK_BLOCK_N - 1) / AK_BLOCK_N);
  const int wg_tiles = fa_wg_tiles(q0, wg_row0, kv_end, seq);

  const KvRing<P, 1> ring{K, V, seq, d, kv_tiles, sk, sv};
  ring.start(sq, Q, q0);

  float o[AK_ROWS][AK_OUTS(P)];
  float mc[AK_ROWS];  // running max of each row times c (-inf: none yet)
  float l[AK_ROWS];   // this thread's part of each row's sum of exponentials
  float alpha[AK_ROWS];
  start_rows<P>(o, mc, l);
  const unsigned q_rows = sq + (unsigned)wg_row0 * 128;
  float s[AK_ROWS][AK_SCORES];
  unsigned pa[AK_BLOCK_N / 16][4];

#if AK_WGMMA == 1
  for (int j = 0; j < kv_tiles; ++j) {
    const unsigned stage = (unsigned)(j % AK_STAGES) * kKVBytes;
    const bool active = j < wg_tiles;  // warpgroup-uniform, as wgmma must be

    cp_async_wait<2 * (AK_STAGES - 1)>();  // K_j has landed (this thread's copies) ...
    fence_proxy_async();                   // ... is visible to the tensor cores ...
    fa_sync();                             // ... everyone's; every warpgroup is done with V_{j-1}
    ring.load_v(j + AK_STAGES - 1);

    if (active) {
      fa_issue_scores<P>(s, q_rows, sk + stage);
      wgmma_wait<0>();
      fa_hold(s);
      tile_softmax(s, mc, l, alpha, (long long)j * AK_BLOCK_N, seq, q0, wr0, c, lane);
      rescale<P>(o, alpha);
      fa_pack(pa, s);
    }

    cp_async_wait<2 * (AK_STAGES - 1)>();  // V_j has landed ...
    fence_proxy_async();
    fa_sync();  // ... everyone's; every warpgroup is done with K_j
    ring.load_k(j + AK_STAGES);

    if (active) {
      fa_issue_pv<P>(o, pa, sv + stage);
      wgmma_wait<0>();
      fa_hold(o);
      fa_hold_p(pa);
    }
  }
#else
  // AK_WGMMA=2: step j issues S_j = Q K_j^T and then P_{j-1} V_{j-1}, so the softmax of S_j
  // runs while the second product is on the tensor cores; the output is rescaled by S_j's factors once that product is
  // done. K_j and V_{j-1} arrive together: the copies run one tile ahead (two stages), V_{j-1}'s group before K_j's.
  // P's fragments alternate between pa and pb, so that packing P_j never writes the registers
  // P_{j-1} V_{j-1} is still reading (no copy for the register allocator to fold).
  unsigned pb[AK_BLOCK_N / 16][4];
  cp_async_wait<2 * (AK_STAGES - 1)>();  // K_0 (and Q) have landed ...
  fence_proxy_async();
  fa_sync();  // ... everyone's
  if (0 < wg_tiles) {
    fa_issue_scores<P>(s, q_rows, sk);
    wgmma_wait<0>();
    fa_hold(s);
    tile_softmax(s, mc, l, alpha, 0, seq, q0, wr0, c, lane);
    fa_pack(pa, s);
  }
  auto step = [&](int j, unsigned(&p_prev)[AK_BLOCK_N / 16][4], unsigned(&p_next)[AK_BLOCK_N / 16][4]) {
    cp_async_wait<0>();  // K_j (if any) and V_{j-1} have landed ...
    fence_proxy_async();
    fa_sync();        // ... everyone's; every warpgroup is done with K_{j-1} and V_{j-2}
    ring.load_v(j);   // into V_{j-2}'s buffer
    ring.load_k(j + 1);  // into K_{j-1}'s

    const unsigned stage = (unsigned)(j % AK_STAGES) * kKVBytes;
    const unsigned prev = (unsigned)((j - 1) % AK_STAGES) * kKVBytes;
    if (j < wg_tiles) {  // S_j, then P_{j-1} V_{j-1}
      fa_issue_scores<P>(s, q_rows, sk + stage);
      fa_issue_pv<P>(o, p_prev, sv + prev);
      wgmma_wait<1>();  // S_j is done (groups complete in order) ...
      fa_hold(s);
      tile_softmax(s, mc, l, alpha, (long long)j * AK_BLOCK_N, seq, q0, wr0, c, lane);
      fa_pack(p_next, s);
      wgmma_wait<0>();  // ... and P_{j-1} V_{j-1}
      fa_hold(o);
      fa_hold_p(p_prev);
      rescale<P>(o, alpha);
    } else if (j == wg_tiles) {  // the warpgroup's last tile: P V alone
      fa_issue_pv<P>(o, p_prev, sv + prev);
      wgmma_wait<0>();
      fa_hold(o);
      fa_hold_p(p_prev);
    }
  };
  for (int j = 1; j <= kv_tiles; j += 2) {
    step(j, pa, pb);
    if (j + 1 <= kv_tiles) step(j + 1, pb, pa);
  }
#endif
  cp_async_wait<0>();  // no copy may still target shared memory when the block exits
  store_rows<P>(O, o, l, q0 + wr0, seq, d, lane);
}
#endif  // AK_FA_WGMMA_ON
