// The Hopper path of matmul.cu (fp16/bf16, compiled for sm_90a with AK_WGMMA=1): warpgroup MMA
// (wgmma.mma_async) reading both operands from shared memory through matrix descriptors, fed by
// a cp.async ring. Included by matmul.cu inside its fp16/bf16 section; everything here is compiled
// only where AK_WGMMA_ON is 1 (sm_90a and a configuration the path can run, below).
//
// Layout. The block's AK_THREADS / 128 warpgroups split the AK_BM rows of the tile evenly (with
// AK_WGMMA=3 each takes a whole tile: AK_WG_COUNT is 1); each
// warpgroup computes (AK_BM / warpgroups) x AK_BN in m64 x nAK_BN x k16 steps, AK_WG_MI of them
// along M, with (AK_WG_MI * AK_BN / 2) fp32 accumulators a thread. Shared memory holds, per stage:
//   A [AK_BM][AK_BK] as stored (K-major), rows of 128 bytes (AK_BK 64, "128B swizzle") or 64 bytes
//     (AK_BK 32, "64B swizzle"): 16-byte chunk c of row r sits at chunk c ^ (r & 7), respectively
//     c ^ ((r >> 1) & 3), the hardware's swizzle on address bits [4, 7) from bits [7, 10).
//   B [AK_BK][AK_BN] in column blocks of 64 (MN-major, 128B swizzle): block j holds columns
//     64 j .. 64 j + 63 as AK_BK rows of 128 bytes, chunk c of row k at chunk c ^ (k & 7).
// Descriptors (PTX ISA, "matrix descriptor"): start address, leading byte offset (LBO) and stride
// byte offset (SBO) in 16-byte units, the swizzle mode in bits 62-63 (1: 128B, 2: 64B).
//   A: SBO = 8 rows (the swizzle atom's height), LBO unused (1); k16 step kk starts 32 kk bytes in.
//   B: LBO = one column block (AK_BK * 128 bytes), SBO = 8 rows of 128 bytes; k16 step kk starts
//     16 kk rows down. The instruction's B transpose bit is set (B is N-major).
// Both need stage bases aligned to the swizzle period (1024 bytes); every stage size here is a
// multiple of it, and a block whose dynamic shared memory does not start 1024-aligned takes the
// mma.sync path instead.
//
// Pipeline (AK_STAGES >= 3). Tile kt is read from stage kt % S while tiles up to kt + S - 2 are in
// flight; at step kt every thread waits for its copies of tile kt, fences them to the async proxy
// (cp.async writes are generic-proxy stores, wgmma reads through the async proxy), and the block
// meets at a barrier; then tile kt + S - 2 is copied into the stage of tile kt - 2, whose wgmma
// every warpgroup waited for (wgmma.wait_group 1 after issuing tile kt - 1) before that barrier.
// One wgmma group is in flight while the next tile's copies are issued.
//
// Constraints (gemm_config_error says them with AK_WGMMA=1; on other GPUs the setting is ignored
// and the mma.sync path runs): AK_THREADS a multiple of 128; AK_BM a multiple of 64 per
// warpgroup; AK_BN in {64, 128, 256}; at most 128 accumulators a thread, and those and about 32
// registers more within what a thread of the block gets (65536 / threads in steps of 8: 128 at
// 512 threads, where ptxas stops with "Insufficient registers"); AK_STAGES >= 3. At run
// time, K and N multiples of 8 and A, B 16-byte aligned (whole 16-byte chunks); otherwise the
// mma.sync path.

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) && AK_WGMMA
// The warpgroups that split a tile's AK_BM rows: all of them, or with AK_WGMMA=3 (ping-pong,
// wgmma_tma.cuh) one, since each computing warpgroup there takes a whole tile of its own.
#if AK_WGMMA == 3
#define AK_WG_COUNT 1
#else
#define AK_WG_COUNT (AK_THREADS / 128 > 0 ? AK_THREADS / 128 : 1)
#endif
#if AK_THREADS % 128 != 0 || AK_BM % (64 * AK_WG_COUNT) != 0 || (AK_BN != 64 && AK_BN != 128 && AK_BN != 256) || \
    AK_STAGES < 3 || (AK_BM / AK_WG_COUNT / 64) * AK_BN / 2 > 128
#error \
    "AK_WGMMA=1 needs warpgroups (AK_WARPS_M * AK_WARPS_N a multiple of 4), AK_BM a multiple of 64 per warpgroup, AK_BN 64, 128 or 256, at most 128 accumulators a thread and AK_STAGES >= 3"
#endif
#if AK_WGMMA == 3 && AK_THREADS != 256
#error "AK_WGMMA=3 (ping-pong) needs two computing warpgroups (AK_WARPS_M * AK_WARPS_N = 8)"
#endif
#define AK_WGMMA_ON 1
#else
#define AK_WGMMA_ON 0
#endif

#if AK_WGMMA_ON
#include "../common/wgmma.cuh"
#if AK_DTYPE == 1
#define AK_WG_TYPE "f16"
#else
#define AK_WG_TYPE "bf16"
#endif
#define AK_WG_MI (AK_BM / AK_WG_COUNT / 64)  // m64 steps per warpgroup
#define AK_WG_ACC (AK_BN / 2)                // accumulators a thread per m64 step
#define AK_WG_A_ROW (AK_BK * 2)              // bytes in a row of A's tile: 64 or 128
#define AK_WG_B_BLOCK (AK_BK * 128)          // bytes in one 64-column block of B's tile

// One wgmma of m64 x AK_BN x k16: d += A-tile (descriptor da, K-major) x B-tile (db, N-major), with
// the fp32 accumulators as operands %0 .. %(AK_BN / 2 - 1), in groups of 32.
#define AK_WG_R0                                                           \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define AK_WG_R1                                                                     \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define AK_WG_R2                                                                     \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define AK_WG_R3                                                                                 \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define AK_WG_D0                                                                                              \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), \
      "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),  \
      "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), \
      "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define AK_WG_D1                                                                                                       \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), \
      "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),          \
      "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),          \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define AK_WG_D2                                                                                                       \
  "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), \
      "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]),          \
      "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]),          \
      "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
#define AK_WG_D3                                                                                                      \
  "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),         \
      "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
      "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
      "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
#if AK_BN == 64
#define AK_WG_REGS AK_WG_R0
#define AK_WG_OUTS AK_WG_D0
#define AK_WG_ARGS "%32, %33, p, 1, 1, 0, 1;\n}\n"
#define AK_WG_P "%34"
#elif AK_BN == 128
#define AK_WG_REGS AK_WG_R0 ", " AK_WG_R1
#define AK_WG_OUTS AK_WG_D0, AK_WG_D1
#define AK_WG_ARGS "%64, %65, p, 1, 1, 0, 1;\n}\n"
#define AK_WG_P "%66"
#else
#define AK_WG_REGS AK_WG_R0 ", " AK_WG_R1 ", " AK_WG_R2 ", " AK_WG_R3
#define AK_WG_OUTS AK_WG_D0, AK_WG_D1, AK_WG_D2, AK_WG_D3
#define AK_WG_ARGS "%128, %129, p, 1, 1, 0, 1;\n}\n"
#define AK_WG_P "%130"
#endif
#define AK_WG_SHAPE_(n) "m64n" #n "k16"
#define AK_WG_SHAPE(n) AK_WG_SHAPE_(n)

__device__ __forceinline__ void wgmma(float (&d)[AK_WG_ACC], unsigned long long da, unsigned long long db) {
  // scale-d is the predicate p (accumulate); imm-scale-a/b 1; A as stored (0), B transposed (1).
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " AK_WG_P
               ", 0;\nwgmma.mma_async.sync.aligned." AK_WG_SHAPE(AK_BN) ".f32." AK_WG_TYPE "." AK_WG_TYPE
                                                                        " {" AK_WG_REGS "}, " AK_WG_ARGS:AK_WG_OUTS
               : "l"(da), "l"(db), "r"(1)
               : "memory");
}

// Keeps the compiler from moving accesses of the accumulators across the wgmma fences and waits
// (the asynchronous instructions own those registers meanwhile).
__device__ __forceinline__ void hold(float (&d)[AK_WG_MI][AK_WG_ACC]) {
#pragma unroll
  for (int i = 0; i < AK_WG_MI; ++i)
#pragma unroll
    for (int j = 0; j < AK_WG_ACC; ++j) asm volatile("" : "+f"(d[i][j])::"memory");
}

// Swizzled offsets of 16-byte chunk c of row r inside a stage (see the top of this file).
__device__ __forceinline__ unsigned wg_a_offset(int r, int c) {
  const int x = AK_BK == 64 ? (r & 7) : ((r >> 1) & 3);
  return (unsigned)(r * AK_WG_A_ROW + ((c ^ x) << 4));
}
__device__ __forceinline__ unsigned wg_b_offset(int k, int c) {
  return (unsigned)((c >> 3) * AK_WG_B_BLOCK + k * 128 + (((c & 7) ^ (k & 7)) << 4));
}

// Issues the warpgroup's wgmma of one stage (AK_BK / 16 k16 steps): its rows of A from sa (the
// stage's A tile plus its first row), B from sb (the stage's B tile).
__device__ __forceinline__ void wg_issue(float (&acc)[AK_WG_MI][AK_WG_ACC], unsigned sa, unsigned sb) {
  constexpr unsigned kAMode = AK_BK == 64 ? 1u : 2u;
#pragma unroll
  for (int kk = 0; kk < AK_BK / 16; ++kk) {
    const unsigned long long db = wg_desc(sb + kk * 16 * 128, AK_WG_B_BLOCK, 8 * 128, 1u);
#pragma unroll
    for (int i = 0; i < AK_WG_MI; ++i)
      wgmma(acc[i], wg_desc(sa + i * 64 * AK_WG_A_ROW + kk * 32, 16, 8 * AK_WG_A_ROW, kAMode), db);
  }
}

// Writes the accumulators of computing thread threadIdx.x (< AK_THREADS) to its rows and columns of
// the tile at (m0, n0). Accumulators of m64nN: warp w of the warpgroup holds rows 16 w .. 16 w + 15;
// lane 4 g + t holds, for each n8 column step j, rows g and g + 8 at columns 8 j + 2 t and
// 8 j + 2 t + 1 (registers 4 j, 4 j + 1 and 4 j + 2, 4 j + 3), the layout of mma.sync's m16n8 per
// step.
// The first of this computing thread's accumulator rows in the tile whose first row is m0 (its
// rows are that one and every 8th after it in steps of 64: wg_store's layout).
__device__ __forceinline__ long long wg_first_row(long long m0) {
  const int tid = threadIdx.x;
  return m0 + (AK_WG_COUNT > 1 ? (tid >> 7) * (AK_BM / AK_WG_COUNT) : 0) + ((tid >> 5) & 3) * 16 + ((tid & 31) >> 2);
}
__device__ __forceinline__ void wg_store(float (&acc)[AK_WG_MI][AK_WG_ACC], elem_t* __restrict__ C, const elem_t* gate,
                                         long long M, long long N, long long m0, long long n0) {
  const int t = threadIdx.x & 3;
  const long long row0 = wg_first_row(m0);
#pragma unroll
  for (int i = 0; i < AK_WG_MI; ++i) {
    const long long row = row0 + i * 64;
#pragma unroll
    for (int j = 0; j < AK_BN / 8; ++j) {
      const long long col = n0 + j * 8 + 2 * t;
      store_pair(C, gate, M, N, row, col, acc[i][4 * j], acc[i][4 * j + 1]);
      store_pair(C, gate, M, N, row + 8, col, acc[i][4 * j + 2], acc[i][4 * j + 3]);
    }
  }
}

// This block's tile by wgmma; A, B, C and gate as in block_gemm, K and N multiples of 8. Not with
// AK_WGMMA=3, whose AK_WG_COUNT of 1 would have every warpgroup compute (and store) the same rows:
// that setting runs the TMA path or matmul.cu's mma.sync paths.
#if AK_WGMMA != 3
__device__ __forceinline__ void block_gemm_wgmma(const elem_t* __restrict__ A, const elem_t* __restrict__ B,
                                                 elem_t* __restrict__ C, const elem_t* gate, long long M, long long N,
                                                 long long K, long long m0, long long n0, unsigned sbase) {
  constexpr int kAChunks = AK_BK / 8, kBChunks = AK_BN / 8;
  constexpr int kAIters = (AK_BM * kAChunks + AK_THREADS - 1) / AK_THREADS;
  constexpr int kBIters = (AK_BK * kBChunks + AK_THREADS - 1) / AK_THREADS;
  const int tid = threadIdx.x;
  const unsigned sa0 = sbase;
  const unsigned sb0 = sbase + AK_STAGES * AK_A_STAGE_BYTES;
  const int ktiles = (int)((K + AK_BK - 1) / AK_BK);

  auto copy_tile = [&](int stage, int kt) {
    const long long k0 = (long long)kt * AK_BK;
    const unsigned sa = sa0 + stage * AK_A_STAGE_BYTES;
    const unsigned sb = sb0 + stage * AK_B_STAGE_BYTES;
#pragma unroll
    for (int i = 0; i < kAIters; ++i) {
      const int id = tid + i * AK_THREADS;
      if ((AK_BM * kAChunks) % AK_THREADS != 0 && id >= AK_BM * kAChunks) break;
      const int r = id / kAChunks, c = id % kAChunks;
      const bool ok = m0 + r < M && k0 + c * 8 < K;
      cp_async16(sa + wg_a_offset(r, c), ok ? (const void*)(A + (m0 + r) * K + k0 + c * 8) : (const void*)A,
                 ok ? 16u : 0u);
    }
#pragma unroll
    for (int i = 0; i < kBIters; ++i) {
      const int id = tid + i * AK_THREADS;
      if ((AK_BK * kBChunks) % AK_THREADS != 0 && id >= AK_BK * kBChunks) break;
      const int k = id / kBChunks, c = id % kBChunks;
      const bool ok = k0 + k < K && n0 + c * 8 < N;
      cp_async16(sb + wg_b_offset(k, c), ok ? (const void*)(B + (k0 + k) * N + n0 + c * 8) : (const void*)B,
                 ok ? 16u : 0u);
    }
  };

#pragma unroll
  for (int s = 0; s < AK_STAGES - 2; ++s) {
    if (s < ktiles) copy_tile(s, s);
    cp_async_commit();
  }

  float acc[AK_WG_MI][AK_WG_ACC];
#pragma unroll
  for (int i = 0; i < AK_WG_MI; ++i)
#pragma unroll
    for (int j = 0; j < AK_WG_ACC; ++j) acc[i][j] = 0.0f;

  const int wg = tid >> 7;
  const unsigned a_row0 = (unsigned)(wg * (AK_BM / AK_WG_COUNT)) * AK_WG_A_ROW;
  int rs = 0;              // stage of tile kt
  int ws = AK_STAGES - 2;  // stage of tile kt + S - 2
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<AK_STAGES - 3>();  // tile kt has landed (this thread's copies) ...
    fence_proxy_async();             // ... is visible to the tensor cores ...
    block_sync();                    // ... everyone's; tile kt - 2's wgmma are done everywhere
    const int next = kt + AK_STAGES - 2;
    if (next < ktiles) copy_tile(ws, next);
    cp_async_commit();
    ws = ws + 1 == AK_STAGES ? 0 : ws + 1;

    const unsigned sa = sa0 + rs * AK_A_STAGE_BYTES + a_row0;
    const unsigned sb = sb0 + rs * AK_B_STAGE_BYTES;
    hold(acc);
    wgmma_fence();
    wg_issue(acc, sa, sb);
    wgmma_commit();
    wgmma_wait<1>();
    hold(acc);
    rs = rs + 1 == AK_STAGES ? 0 : rs + 1;
  }
  wgmma_wait<0>();
  hold(acc);
  cp_async_wait<0>();  // no copy may still target shared memory when the block exits
  wg_store(acc, C, gate, M, N, m0, n0);
}
#endif  // AK_WGMMA != 3
#endif  // AK_WGMMA_ON
