// Matrix product C = A @ B, CUDA starter candidate (compiled by NVRTC: device code only; the one
// include is inlined by kernels/embed.cmake).
//
// Contract:
//   extern "C" __global__ void ak_matmul(const void* a, const void* b, void* c, long long M,
//                                        long long N, long long K)
//   A [M, K], B [K, N], C [M, N], all row-major and contiguous, one dtype (-DAK_DTYPE=0|1|2: fp32,
//   fp16, bf16); any M, N, K >= 1. Products are accumulated in fp32 and C is rounded once at the
//   end. Every element of C is written, nothing outside A, B, C is touched, no atomics: the
//   result is bitwise identical from run to run.
//
// Launch geometry (the harness computes it from the tunables):
//   block = AK_WARPS_M * AK_WARPS_N * 32 threads, 1-D, plus a producer warpgroup of 128 with
//           AK_WGMMA=2 or 3 in fp16/bf16
//   grid  = (ceil(M / AK_BM) * ceil(N / AK_BN), 1, 1), 1-D (half of it, rounded up, with AK_WGMMA=3
//           in fp16/bf16: two tiles a block), at most AK_MAX_BLOCKS when that is not
//           0; block b computes tiles b, b + gridDim.x, ...; the kernel maps a tile id to a tile
//           in groups of AK_GROUP_M tile rows (each group is walked column by column), so that
//           consecutive blocks share A and B tiles in L2. AK_GROUP_M = 1 is plain row-major order.
//   dynamic shared memory [bytes]
//           fp16/bf16: AK_STAGES * (AK_BM * AK_BK + AK_BK * AK_BN) * 2
//           fp32:      AK_STAGES * ((AK_BM + 4) * AK_BK + AK_BK * AK_BN) * 4
//           (the harness sets CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES before the first
//           launch, static shared memory counted; combinations above 227 KiB fail to compile).
//
// Algorithm. Each block computes one AK_BM x AK_BN tile of C, each warp a (AK_BM / AK_WARPS_M) x
// (AK_BN / AK_WARPS_N) sub-tile, walking K in steps of AK_BK through an AK_STAGES-deep ring of
// shared-memory stages filled by cp.async (one __syncthreads per step).
//   fp16/bf16: tensor cores, mma.sync m16n8k16 with fp32 accumulators; fragments come from shared
//     memory by ldmatrix (A as stored, B with .trans since it is stored [K, N]) and are double-
//     buffered in registers, so the next k16 step's ldmatrix overlap this step's mma. Tiles keep
//     the global layout, rows in 16-byte chunks whose index is XORed with the row so that the
//     eight rows one ldmatrix phase reads fall in distinct banks (no padding). Rows of A (B) are
//     copied 16 bytes at a time when K (N) is a multiple of 8 and the base 16-byte aligned,
//     zero-filled past the edges by cp.async's source size; otherwise that operand goes element
//     by element through registers (correct for any shape, about 2.5x slower).
//   fp32: plain FFMA (no TF32), so the same tile names drive a register-tiled SIMT kernel. Lanes
//     form an 8 x 4 (warp tile taller than wide or square) or 4 x 8 grid, each thread owns
//     TM x TN = (warp_m / lanes_m) x (warp_n / lanes_n) outputs as 4 x 4 blocks spread over the
//     warp tile, read as float4 from A stored transposed ([AK_BK][AK_BM + 4], copied 4 bytes at
//     a time; the 4-float pad spreads the transposing writes over the banks) and B as stored.
//
// Hopper (sm_90a, fp16/bf16, AK_WGMMA=1): wgmma.cuh, warpgroup MMA from swizzled shared memory,
// for aligned operands whose K and N are multiples of 8; the other cases keep the path above.
// AK_WGMMA=2: wgmma_tma.cuh, the same MMA fed by TMA from a producer warpgroup, where the sandbox
// gave the call its tensor maps; otherwise the paths above. AK_WGMMA=3: the same with each of two
// computing warpgroups on a tile of its own, their main loops taking turns (ping-pong), so that
// one warpgroup's stores overlap the other's MMA.
//
// Reuse: gemm_tile() computes one block's tile; a source that defines AK_MATMUL_NO_ENTRY before
// including this file (kernels/fused_mlp/fused_mlp.cu) gets the GEMM without the ak_matmul entry,
// and may pass a gate matrix of C's shape for the SwiGLU epilogue silu(gate) * (A @ B).
//
// Tunables (default; values for the search space):
//   AK_BM       block tile rows          128   {64, 128, 256}
//   AK_BN       block tile columns       128   {64, 128, 256}
//   AK_BK       K step                   32    {8, 16, 32, 64}   (8 and 16: fp32 only)
//   AK_WARPS_M  warps along M            2     {1, 2, 4}
//   AK_WARPS_N  warps along N            2     {1, 2, 4}         (default 4 for fp32)
//   AK_STAGES   shared-memory stages     4     {2, 3, 4, 5}
//   AK_GROUP_M  tile rows per L2 group   8     {1, 8}
//   AK_MAX_BLOCKS  blocks at most        0     {0, 132, 264}   (0: a block per tile; otherwise
//                                                      each block loops over tiles; launch only)
//   AK_WGMMA    warpgroup MMA (sm_90a)   0     {0, 1, 2, 3} (wgmma.cuh; 2: TMA, wgmma_tma.cuh;
//                                                      3: TMA ping-pong;
//                                                      fp16/bf16 on sm_90a only, else ignored;
//                                                      default 1 for bf16; refused in fp32)
// Rejected at compile time (#error), so the compile stage drops them from a sweep:
//   all:       a tile size not a power of two; AK_STAGES outside [2, 8]; AK_GROUP_M < 1; more
//              than 1024 threads; shared memory (formula above) over 227 KiB.
//   fp16/bf16: AK_BK other than 32 or 64 (the fragment double buffer takes an even number of
//              k16 steps); a warp tile (AK_BM / AK_WARPS_M) x (AK_BN / AK_WARPS_N) under 16 in
//              either dimension or over 64 x 64 elements in area (128 accumulators a thread);
//              AK_BN / 8 not dividing the thread count.
//   fp32:      AK_BK < 4; a thread tile TM or TN (above) under 4, or TM * TN over 128; AK_WGMMA=1.
// The defaults differ in AK_WARPS_N, and in AK_WGMMA (1 for bf16). fp16/bf16: 2 x 2 warps of
// 64 x 64, two blocks an SM.
// fp32: 2 x 4 warps of 64 x 32 (8 x 8 outputs a thread); at 2 x 2 it is valid but spills (128
// outputs a thread plus the four-byte copies of A) and runs at less than half the speed.

#ifndef AK_BM
#define AK_BM 128
#endif
#ifndef AK_BN
#define AK_BN 128
#endif
#ifndef AK_BK
#define AK_BK 32
#endif
#ifndef AK_WARPS_M
#define AK_WARPS_M 2
#endif
#ifndef AK_WARPS_N
#if !defined(AK_DTYPE) || AK_DTYPE == 0  // elem.cuh's default dtype is fp32
#define AK_WARPS_N 4
#else
#define AK_WARPS_N 2
#endif
#endif
#ifndef AK_STAGES
#define AK_STAGES 4
#endif
#ifndef AK_GROUP_M
#define AK_GROUP_M 8
#endif
#ifndef AK_WGMMA
#define AK_WGMMA 0
#endif

#define AK_THREADS (AK_WARPS_M * AK_WARPS_N * 32)
// AK_WGMMA=2 or 3 (fp16/bf16): a producer warpgroup follows the AK_THREADS computing threads
// (wgmma_tma.cuh); the other paths leave it idle, and their barriers count AK_THREADS only.
#if defined(AK_DTYPE) && AK_DTYPE != 0 && (AK_WGMMA == 2 || AK_WGMMA == 3)
#define AK_BLOCK_THREADS (AK_THREADS + 128)
#else
#define AK_BLOCK_THREADS AK_THREADS
#endif

#if AK_BM < 1 || (AK_BM & (AK_BM - 1)) != 0 || AK_BN < 1 || (AK_BN & (AK_BN - 1)) != 0 || AK_BK < 1 || \
    (AK_BK & (AK_BK - 1)) != 0
#error "AK_BM, AK_BN and AK_BK must be powers of two"
#endif
#if AK_WARPS_M < 1 || AK_WARPS_N < 1 || AK_BLOCK_THREADS > 1024
#error "AK_WARPS_M and AK_WARPS_N must be >= 1 with at most 1024 threads in all"
#endif
#if AK_STAGES < 2 || AK_STAGES > 8
#error "AK_STAGES must be in [2, 8]"
#endif
#if AK_GROUP_M < 1
#error "AK_GROUP_M must be >= 1"
#endif

#include "../common/elem.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "ak_matmul needs sm_80 or newer (cp.async, bf16 mma.sync)"
#endif

#define AK_WM (AK_BM / AK_WARPS_M)  // warp tile rows
#define AK_WN (AK_BN / AK_WARPS_N)  // warp tile columns
#define AK_MAX_SMEM_BYTES (227 * 1024)

#if AK_DTYPE == 0
#define AK_A_LD (AK_BM + 4)  // row stride of the transposed A tile [floats]
#define AK_SMEM_BYTES (AK_STAGES * (AK_A_LD * AK_BK + AK_BK * AK_BN) * 4)
#define AK_LANES_M (AK_WM >= AK_WN ? 8 : 4)
#define AK_LANES_N (32 / AK_LANES_M)
#define AK_TM (AK_WM / AK_LANES_M)
#define AK_TN (AK_WN / AK_LANES_N)
#if AK_BK < 4
#error "fp32: AK_BK must be >= 4"
#endif
#if AK_WGMMA
#error "AK_WGMMA=1 is for fp16/bf16 (fp32 runs the SIMT path either way)"
#endif
#if AK_TM < 4 || AK_TN < 4 || AK_TM * AK_TN > 128
#error "fp32: the thread tile (BM/WARPS_M/lanes_m) x (BN/WARPS_N/lanes_n) must be >= 4 x 4 and <= 128 outputs"
#endif
#else
#define AK_SMEM_BYTES (AK_STAGES * (AK_BM * AK_BK + AK_BK * AK_BN) * 2)
#if AK_BK != 32 && AK_BK != 64
#error "fp16/bf16: AK_BK must be 32 or 64 (the fragment double buffer needs an even number of k16 steps)"
#endif
#if AK_WM < 16 || AK_WN < 16 || AK_WM * AK_WN > 64 * 64
#error "fp16/bf16: the warp tile (BM/WARPS_M) x (BN/WARPS_N) must be at least 16 x 16 and at most 4096 elements"
#endif
#if AK_THREADS % (AK_BN / 8) != 0
#error "fp16/bf16: AK_BN / 8 (16-byte chunks in a row of B's tile) must divide the thread count"
#endif
#endif
#if AK_SMEM_BYTES > AK_MAX_SMEM_BYTES
#error "the shared-memory stages exceed 227 KiB; lower AK_STAGES or the tile sizes"
#endif

// ---- PTX wrappers -------------------------------------------------------------------------

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  unsigned r;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
  return r;
}

// 16-byte copy; bytes past src_bytes (0 or 16 here) are zero-filled and not read.
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, unsigned src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}

// 4-byte copy (cached in L1: neighbouring threads read the same sectors); src_bytes 0 or 4.
__device__ __forceinline__ void cp_async4(unsigned dst, const void* src, unsigned src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}

// A barrier of the computing threads (all but the producer warpgroup of AK_WGMMA=2 and 3).
__device__ __forceinline__ void block_sync() {
#if AK_BLOCK_THREADS != AK_THREADS
  asm volatile("bar.sync 1, %0;\n" ::"n"(AK_THREADS) : "memory");
#else
  __syncthreads();
#endif
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// How many tiles of C there are; a block computes tiles blockIdx.x, blockIdx.x + gridDim.x, ...
// (one each unless AK_MAX_BLOCKS caps the grid).
__device__ __forceinline__ long long tile_count(long long M, long long N) {
  return ((M + AK_BM - 1) / AK_BM) * ((N + AK_BN - 1) / AK_BN);
}

// Tile (row, column) of C for tile id pid: groups of AK_GROUP_M tile rows, column-major inside a
// group, so that the blocks resident at one time reuse a few rows of A and columns of B in L2.
__device__ __forceinline__ void block_tile(long long pid, long long M, long long N, long long& tm, long long& tn) {
  const long long grid_m = (M + AK_BM - 1) / AK_BM;
  const long long grid_n = (N + AK_BN - 1) / AK_BN;
  const long long per_group = (long long)AK_GROUP_M * grid_n;
  const long long first_m = pid / per_group * AK_GROUP_M;
  const long long rows = grid_m - first_m < AK_GROUP_M ? grid_m - first_m : AK_GROUP_M;
  const long long in_group = pid % per_group;
  tm = first_m + in_group % rows;
  tn = in_group / rows;
}

// The SwiGLU epilogue of kernels/fused_mlp, which includes this file: result v of an output whose
// gate value is g becomes silu(g) * v = g / (1 + exp(-g)) * v, in fp32. Plain matmul passes no
// gate, and the branch on it costs nothing.
__device__ __forceinline__ float gated(elem_t g, float v) {
  const float x = to_f32(g);
  return x / (1.0f + expf(-x)) * v;
}

#if AK_DTYPE != 0
// ---- fp16 / bf16: tensor cores ------------------------------------------------------------

#define AK_MI (AK_WM / 16)        // m16 tiles per warp
#define AK_NI (AK_WN / 8)         // n8 tiles per warp
#define AK_A_CHUNKS (AK_BK / 8)   // 16-byte chunks per A tile row
#define AK_B_CHUNKS (AK_BN / 8)   // 16-byte chunks per B tile row
#define AK_A_STAGE_BYTES (AK_BM * AK_BK * 2)
#define AK_B_STAGE_BYTES (AK_BK * AK_BN * 2)

// Byte offset of 16-byte chunk c of row r in a tile with kChunks chunks per row. The chunk's low
// three index bits are XORed with bits of the row so that chunk c of eight consecutive rows
// (r0 a multiple of 8: what one ldmatrix phase or eight cp.async threads touch) lands in eight
// distinct 128-byte bank groups. Rows of >= 8 chunks XOR with r; shorter rows share a 128-byte
// line, and the chunk's index in the whole tile is XORed with its line's index instead.
template <int kChunks>
__device__ __forceinline__ unsigned swizzle(int r, int c) {
  if (kChunks >= 8) return (unsigned)(r * kChunks + (c ^ (r & 7))) * 16u;
  const int lin = r * kChunks + c;
  return (unsigned)(lin ^ ((lin >> 3) & 7)) * 16u;
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3,
                                                  unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}

__device__ __forceinline__ void mma16816(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
#if AK_DTYPE == 1
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

__device__ __forceinline__ void st_shared_v4(unsigned addr, unsigned x, unsigned y, unsigned z, unsigned w) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(x), "r"(y), "r"(z), "r"(w) : "memory");
}

// Eight elements p[0..7], those at index >= n read as zero, packed in pairs (low half first).
__device__ __forceinline__ void load8_guarded(const elem_t* p, int n, unsigned (&w)[4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const unsigned lo = 2 * j < n ? (unsigned)p[2 * j] : 0u;
    const unsigned hi = 2 * j + 1 < n ? (unsigned)p[2 * j + 1] : 0u;
    w[j] = lo | (hi << 16);
  }
}

// Offset of the tile's chunk tid + i * threads. The swizzle pattern repeats every 8 lines of 128
// bytes (every 8 rows for rows of >= 8 chunks); when the threads span whole periods, chunk i is
// chunk 0 plus i periods, which keeps one offset per thread instead of one per chunk.
template <int kChunks>
__device__ __forceinline__ unsigned chunk_offset(int tid, int i) {
  constexpr int kPeriod = 8 * (kChunks > 8 ? kChunks : 8);
  if (AK_THREADS % kPeriod == 0)
    return swizzle<kChunks>(tid / kChunks, tid % kChunks) + (unsigned)(i * AK_THREADS * 16);
  const int id = tid + i * AK_THREADS;
  return swizzle<kChunks>(id / kChunks, id % kChunks);
}

// One operand's copies into a stage: a tile of kRows x kChunks 16-byte chunks of a row-major
// matrix. Thread tid owns chunk column tid % kChunks of rows tid / kChunks + i * kRowStep. With
// 16-byte cp.async (the matrix's rows 16-byte aligned) a chunk is wholly inside or outside the
// matrix; outside ones are zero-filled and their source never read. Otherwise (kVec false) the
// thread reads element by element with guards and stores the chunk itself.
template <int kRows, int kChunks, bool kVec>
struct stage_copy {
  static constexpr int kIters = (kRows * kChunks + AK_THREADS - 1) / AK_THREADS;
  static constexpr int kRowStep = AK_THREADS / kChunks;
  static constexpr bool kRagged = (kRows * kChunks) % AK_THREADS != 0;  // last round: some threads idle
  int r0;         // first row inside the tile
  int c8;         // column inside the tile [elements]
  unsigned dst0;  // offset of the first chunk inside a stage [bytes]

  __device__ __forceinline__ void init(int tid) {
    r0 = tid / kChunks;
    c8 = (tid % kChunks) * 8;
    dst0 = chunk_offset<kChunks>(tid, 0);
  }

  // src: element (r0, c8) of this tile; base: any valid address; ld: the matrix's row length;
  // rows, cols: how many of the tile's rows and columns [elements] lie inside the matrix.
  __device__ __forceinline__ void copy(unsigned stage, const elem_t* base, const elem_t* src, long long ld, int rows,
                                       int cols, int tid) const {
    if (rows >= kRows && cols >= kChunks * 8) {  // the common case: nothing to check
#pragma unroll
      for (int i = 0; i < kIters; ++i) {
        if (kRagged && tid + i * AK_THREADS >= kRows * kChunks) break;
        chunk(stage + (i == 0 ? dst0 : chunk_offset<kChunks>(tid, i)), base, src + (long long)(i * kRowStep) * ld,
              true, 8);
      }
    } else {
#pragma unroll
      for (int i = 0; i < kIters; ++i) {
        if (kRagged && tid + i * AK_THREADS >= kRows * kChunks) break;
        chunk(stage + (i == 0 ? dst0 : chunk_offset<kChunks>(tid, i)), base, src + (long long)(i * kRowStep) * ld,
              r0 + i * kRowStep < rows && c8 < cols, cols - c8);
      }
    }
  }

  // One chunk: n elements of s (n >= 8 with 16-byte copies) if ok, else zeros.
  __device__ __forceinline__ static void chunk(unsigned dst, const elem_t* base, const elem_t* s, bool ok, int n) {
    if (kVec) {
      cp_async16(dst, ok ? (const void*)s : (const void*)base, ok ? 16u : 0u);
    } else {
      unsigned w[4] = {0u, 0u, 0u, 0u};
      if (ok) load8_guarded(s, n, w);
      st_shared_v4(dst, w[0], w[1], w[2], w[3]);
    }
  }
};

// Two adjacent outputs (row, col) and (row, col + 1); one 4-byte store where both exist and the
// pair is 4-byte aligned (N even, col even).
__device__ __forceinline__ void store_pair(elem_t* __restrict__ C, const elem_t* gate, long long M, long long N,
                                           long long row, long long col, float v0, float v1) {
  if (row >= M) return;
  elem_t* p = C + row * N + col;
  if (gate) {
    const elem_t* q = gate + row * N + col;
    v0 = col < N ? gated(q[0], v0) : v0;
    v1 = col + 1 < N ? gated(q[1], v1) : v1;
  }
  const unsigned short h0 = from_f32(v0);
  const unsigned short h1 = from_f32(v1);
  if (col + 1 < N && (N & 1) == 0) {
    *(unsigned*)p = (unsigned)h0 | ((unsigned)h1 << 16);
  } else {
    if (col < N) p[0] = h0;
    if (col + 1 < N) p[1] = h1;
  }
}

// ldmatrix addresses. Lane l names row (l & 15) of a 16-row block and 8-column half (l >> 4),
// i.e. the four 8x8 matrices in the order of the mma fragment registers (A: rows 0-7 / 8-15 at
// k 0-7, then at k 8-15; B: k 0-7 / 8-15 of n 0-7, then of n 8-15). a0 and b0 are the offsets
// of the warp's first block at k16 step 0. The other blocks follow from them: the index bits
// that kk (A's chunk 2kk + half) and j (B's chunk wn0 / 8 + 2j + half, wn0 / 8 a multiple of
// the warp's n8 count) contribute are never carried into, so they XOR like the swizzle; and
// 16 more rows (A's tile i, B's step kk) are a whole number of swizzle periods, except for B
// rows of 2 chunks (AK_BN = 16), whose one pair per warp is computed outright.
__device__ __forceinline__ void load_frags(unsigned (&af)[AK_MI][4], unsigned (&bf)[AK_NI][2], unsigned sa,
                                           unsigned sb, unsigned a0, unsigned b0, int kk, int lane, int wn0) {
#pragma unroll
  for (int i = 0; i < AK_MI; ++i)
    ldmatrix_x4(af[i], sa + (a0 ^ (unsigned)(kk << 5)) + (unsigned)(i * 16 * AK_BK * 2));
#pragma unroll
  for (int j = 0; j < AK_NI / 2; ++j) {
    const unsigned off = AK_B_CHUNKS >= 4
                             ? (b0 ^ (unsigned)(j << 5)) + (unsigned)(kk * 16 * AK_BN * 2)
                             : swizzle<AK_B_CHUNKS>(kk * 16 + (lane & 15), wn0 / 8 + 2 * j + (lane >> 4));
    ldmatrix_x4_trans(bf[2 * j][0], bf[2 * j][1], bf[2 * j + 1][0], bf[2 * j + 1][1], sb + off);
  }
}

// The block's tile: an AK_STAGES ring of shared-memory stages, fragments double-buffered in
// registers so that the ldmatrix of k16 step kk + 1 (or of the next stage's step 0) is in
// flight while step kk's mma run. kAVec / kBVec: the operand is copied by 16-byte cp.async.
template <bool kAVec, bool kBVec>
__device__ __forceinline__ void block_gemm(const elem_t* __restrict__ A, const elem_t* __restrict__ B,
                                           elem_t* __restrict__ C, const elem_t* gate, long long M, long long N,
                                           long long K, long long m0, long long n0, unsigned sbase) {
  constexpr int kSteps = AK_BK / 16;
  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int wm0 = (warp / AK_WARPS_N) * AK_WM;  // warp tile origin inside the block tile
  const int wn0 = (warp % AK_WARPS_N) * AK_WN;
  const unsigned sa0 = sbase;
  const unsigned sb0 = sbase + AK_STAGES * AK_A_STAGE_BYTES;
  const int ktiles = (int)((K + AK_BK - 1) / AK_BK);

  // Copies of A (tile rows m0.., columns k0..) and B (rows k0.., columns n0..).
  stage_copy<AK_BM, AK_A_CHUNKS, kAVec> ca;
  stage_copy<AK_BK, AK_B_CHUNKS, kBVec> cb;
  ca.init(tid);
  cb.init(tid);
  const int a_rows = M - m0 < AK_BM ? (int)(M - m0) : AK_BM;
  const int b_cols = N - n0 < AK_BN ? (int)(N - n0) : AK_BN;
  const elem_t* a_src = A + (m0 + ca.r0) * K + ca.c8;  // at k0 = 0
  const elem_t* b_src = B + (long long)cb.r0 * N + n0 + cb.c8;
  auto copy_tile = [&](int stage, int kt) {
    const long long k0 = (long long)kt * AK_BK;
    const int k_left = K - k0 < AK_BK ? (int)(K - k0) : AK_BK;
    ca.copy(sa0 + stage * AK_A_STAGE_BYTES, A, a_src + k0, K, a_rows, k_left, tid);
    cb.copy(sb0 + stage * AK_B_STAGE_BYTES, B, b_src + k0 * N, N, k_left, b_cols, tid);
  };

  const unsigned a0 = swizzle<AK_A_CHUNKS>(wm0 + (lane & 15), lane >> 4);
  const unsigned b0 = swizzle<AK_B_CHUNKS>(lane & 15, wn0 / 8 + (lane >> 4));

#pragma unroll
  for (int s = 0; s < AK_STAGES - 1; ++s) {
    if (s < ktiles) copy_tile(s, s);
    cp_async_commit();
  }

  float acc[AK_MI][AK_NI][4];
#pragma unroll
  for (int i = 0; i < AK_MI; ++i)
#pragma unroll
    for (int j = 0; j < AK_NI; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  unsigned af[2][AK_MI][4];
  unsigned bf[2][AK_NI][2];
  cp_async_wait<AK_STAGES - 2>();
  block_sync();
  load_frags(af[0], bf[0], sa0, sb0, a0, b0, 0, lane, wn0);

  // Stage kt % S is read while tile kt + S - 1 is copied into stage (kt - 1) % S, which every
  // warp finished reading before the barrier of step (kt - 1, last). Commit groups stay one per
  // tile (empty past the end), so "tile kt + 1 has landed" is always wait_group(S - 2).
  int rs = 0;               // stage being read
  int ws = AK_STAGES - 1;   // stage being written
  for (int kt = 0; kt < ktiles; ++kt) {
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk) {
      if (kk == 0) {
        const int next = kt + AK_STAGES - 1;
        if (next < ktiles) copy_tile(ws, next);
        cp_async_commit();
        ws = ws + 1 == AK_STAGES ? 0 : ws + 1;
      }
      if (kk == kSteps - 1) {
        cp_async_wait<AK_STAGES - 2>();  // tile kt + 1 has landed (this thread's copies) ...
        block_sync();                    // ... everyone's; stage rs is no longer read
        rs = rs + 1 == AK_STAGES ? 0 : rs + 1;
      }
      // Past the last tile this reads a stage nobody writes any more; the values go unused.
      load_frags(af[(kk + 1) & 1], bf[(kk + 1) & 1], sa0 + rs * AK_A_STAGE_BYTES, sb0 + rs * AK_B_STAGE_BYTES, a0,
                 b0, (kk + 1) % kSteps, lane, wn0);
#pragma unroll
      for (int i = 0; i < AK_MI; ++i)
#pragma unroll
        for (int j = 0; j < AK_NI; ++j) mma16816(acc[i][j], af[kk & 1][i], bf[kk & 1][j]);
    }
  }
  cp_async_wait<0>();  // no copy may still target shared memory when the block exits

  // Accumulator layout of m16n8: lane = 4 * g + t holds rows g and g + 8, columns 2t and 2t + 1.
  const int g = lane >> 2;
  const int t = lane & 3;
#pragma unroll
  for (int i = 0; i < AK_MI; ++i) {
    const long long row = m0 + wm0 + i * 16 + g;
#pragma unroll
    for (int j = 0; j < AK_NI; ++j) {
      const long long col = n0 + wn0 + j * 8 + 2 * t;
      store_pair(C, gate, M, N, row, col, acc[i][j][0], acc[i][j][1]);
      store_pair(C, gate, M, N, row + 8, col, acc[i][j][2], acc[i][j][3]);
    }
  }
}

#include "../matmul/wgmma.cuh"
#include "../matmul/wgmma_tma.cuh"

// The variants with a guarded operand, kept out of line so that ptxas allocates their registers
// on their own: inlined next to the fast variant, all four spilled at the default tile.
template <bool kAVec, bool kBVec>
__device__ __noinline__ void block_gemm_guarded(const elem_t* __restrict__ A, const elem_t* __restrict__ B,
                                                elem_t* __restrict__ C, const elem_t* gate, long long M, long long N,
                                                long long K, long long m0, long long n0, unsigned sbase) {
  block_gemm<kAVec, kBVec>(A, B, C, gate, M, N, K, m0, n0, sbase);
}

// The paths without TMA, for the computing threads. Beside the TMA path they are a call of their
// own, so that their register pressure (a block of more than 256 threads has fewer registers)
// does not spill into it, and they leave out the cp.async wgmma path: ptxas serialises every
// wgmma of a kernel whose wgmma run inside a called function (its warning C7510).
#if AK_TMA_ON
#define AK_PATHS_INLINE __noinline__
#else
#define AK_PATHS_INLINE __forceinline__
#endif
__device__ AK_PATHS_INLINE void gemm_paths(const elem_t* __restrict__ A, const elem_t* __restrict__ B,
                                           elem_t* __restrict__ C, const elem_t* G, long long M, long long N,
                                           long long K, long long m0, long long n0, unsigned sbase) {
  // Rows of A (B) start 16-byte aligned when K (N) is a multiple of 8 elements.
  const bool a_vec = (K & 7) == 0 && ((unsigned long long)A & 15) == 0;
  const bool b_vec = (N & 7) == 0 && ((unsigned long long)B & 15) == 0;
#if AK_WGMMA_ON && !AK_TMA_ON
  if (a_vec && b_vec && (sbase & 1023u) == 0) {
    block_gemm_wgmma(A, B, C, G, M, N, K, m0, n0, sbase);
    return;
  }
#endif
  if (a_vec && b_vec)
    block_gemm<true, true>(A, B, C, G, M, N, K, m0, n0, sbase);
  else if (a_vec)
    block_gemm_guarded<true, false>(A, B, C, G, M, N, K, m0, n0, sbase);
  else if (b_vec)
    block_gemm_guarded<false, true>(A, B, C, G, M, N, K, m0, n0, sbase);
  else
    block_gemm_guarded<false, false>(A, B, C, G, M, N, K, m0, n0, sbase);
}

// This block's tiles of C = A @ B (see the top of the file), gated when gate is not null.
__device__ __forceinline__ void gemm_tile(const void* a, const void* b, void* c, const void* gate, long long M,
                                          long long N, long long K, unsigned char* smem) {
  const unsigned sbase = smem_u32(smem);
#if AK_TMA_ON
  const int slot = tma_slot(a, b, M, N, K);
  if (slot >= 0 && (sbase & 1023u) == 0) {
    block_gemm_tma<false>(ak_tensor_maps[slot], nullptr, (elem_t*)c, (const elem_t*)gate, M, N, K, sbase);
    return;
  }
#endif
#if AK_BLOCK_THREADS != AK_THREADS
  if (threadIdx.x >= AK_THREADS) return;  // the producer warpgroup: nothing to do on these paths
#endif
  const long long tiles = tile_count(M, N);
  for (long long pid = blockIdx.x; pid < tiles; pid += gridDim.x) {
    if (pid != blockIdx.x) block_sync();  // everyone is done with the previous tile's shared memory
    long long tile_m, tile_n;
    block_tile(pid, M, N, tile_m, tile_n);
    gemm_paths((const elem_t*)a, (const elem_t*)b, (elem_t*)c, (const elem_t*)gate, M, N, K, tile_m * AK_BM,
               tile_n * AK_BN, sbase);
  }
}

#else
// ---- fp32: SIMT FFMA ----------------------------------------------------------------------

#define AK_A_STAGE_FLOATS (AK_A_LD * AK_BK)
#define AK_B_STAGE_FLOATS (AK_BK * AK_BN)

// A tile element (r, k) goes to sa[k * AK_A_LD + r]: copied one float at a time (any K).
__device__ __forceinline__ void load_a_tile(const float* __restrict__ A, unsigned sa, long long M, long long K,
                                            long long m0, long long k0, int tid) {
  constexpr int kElems = AK_BM * AK_BK;
#pragma unroll
  for (int i = 0; i < (kElems + AK_THREADS - 1) / AK_THREADS; ++i) {
    const int id = tid + i * AK_THREADS;
    if (kElems % AK_THREADS != 0 && id >= kElems) break;
    const int r = id / AK_BK;  // consecutive threads read along a row of A
    const int k = id % AK_BK;
    const long long gm = m0 + r;
    const long long gk = k0 + k;
    const bool ok = gm < M && gk < K;
    cp_async4(sa + (unsigned)(k * AK_A_LD + r) * 4u, ok ? (const void*)(A + gm * K + gk) : (const void*)A,
              ok ? 4u : 0u);
  }
}

// B tile element (k, n) goes to sb[k * AK_BN + n]: 16 bytes at a time when N % 4 == 0.
__device__ __forceinline__ void load_b_tile(const float* __restrict__ B, unsigned sb, long long K, long long N,
                                            long long k0, long long n0, bool vec, int tid) {
  if (vec) {
    constexpr int kChunks = AK_BK * AK_BN / 4;
#pragma unroll
    for (int i = 0; i < (kChunks + AK_THREADS - 1) / AK_THREADS; ++i) {
      const int id = tid + i * AK_THREADS;
      if (kChunks % AK_THREADS != 0 && id >= kChunks) break;
      const int r = id / (AK_BN / 4);
      const int c = id % (AK_BN / 4);
      const long long gk = k0 + r;
      const long long gn = n0 + c * 4;
      const bool ok = gk < K && gn < N;
      cp_async16(sb + (unsigned)(r * AK_BN + c * 4) * 4u, ok ? (const void*)(B + gk * N + gn) : (const void*)B,
                 ok ? 16u : 0u);
    }
  } else {
    constexpr int kElems = AK_BK * AK_BN;
#pragma unroll 4
    for (int i = 0; i < (kElems + AK_THREADS - 1) / AK_THREADS; ++i) {
      const int id = tid + i * AK_THREADS;
      if (kElems % AK_THREADS != 0 && id >= kElems) break;
      const int r = id / AK_BN;
      const int n = id % AK_BN;
      const long long gk = k0 + r;
      const long long gn = n0 + n;
      const bool ok = gk < K && gn < N;
      cp_async4(sb + (unsigned)(r * AK_BN + n) * 4u, ok ? (const void*)(B + gk * N + gn) : (const void*)B,
                ok ? 4u : 0u);
    }
  }
}

// Tile pid of C = A @ B (see the top of the file), gated when gate is not null.
__device__ __forceinline__ void gemm_one(long long pid, const void* a, const void* b, void* c, const void* gate,
                                         long long M, long long N, long long K, unsigned char* smem) {
  const float* A = (const float*)a;
  const float* B = (const float*)b;
  float* C = (float*)c;

  long long tile_m, tile_n;
  block_tile(pid, M, N, tile_m, tile_n);
  const long long m0 = tile_m * AK_BM;
  const long long n0 = tile_n * AK_BN;

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int wm0 = (warp / AK_WARPS_N) * AK_WM;
  const int wn0 = (warp % AK_WARPS_N) * AK_WN;
  // The thread's outputs: 4 x 4 blocks at rows wm0 + gi * 4 * lanes_m + lm * 4 and columns
  // wn0 + gj * 4 * lanes_n + ln * 4, so that a warp's float4 reads of one k cover contiguous
  // 16 * lanes bytes (no bank conflicts, broadcasts among equal lm or ln).
  const int lm = lane / AK_LANES_N;
  const int ln = lane % AK_LANES_N;

  const float* As = (const float*)smem;
  const float* Bs = As + AK_STAGES * AK_A_STAGE_FLOATS;
  const unsigned sa0 = smem_u32(smem);
  const unsigned sb0 = sa0 + AK_STAGES * AK_A_STAGE_FLOATS * 4;

  const bool b_vec = (N & 3) == 0 && ((unsigned long long)b & 15) == 0;
  const int ktiles = (int)((K + AK_BK - 1) / AK_BK);

#pragma unroll
  for (int s = 0; s < AK_STAGES - 1; ++s) {
    if (s < ktiles) {
      load_a_tile(A, sa0 + s * AK_A_STAGE_FLOATS * 4, M, K, m0, (long long)s * AK_BK, tid);
      load_b_tile(B, sb0 + s * AK_B_STAGE_FLOATS * 4, K, N, (long long)s * AK_BK, n0, b_vec, tid);
    }
    cp_async_commit();
  }

  float acc[AK_TM][AK_TN];
#pragma unroll
  for (int i = 0; i < AK_TM; ++i)
#pragma unroll
    for (int j = 0; j < AK_TN; ++j) acc[i][j] = 0.0f;

  int stage = 0;
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<AK_STAGES - 2>();
    __syncthreads();

    const int next = kt + AK_STAGES - 1;
    if (next < ktiles) {
      const int ns = next % AK_STAGES;
      load_a_tile(A, sa0 + ns * AK_A_STAGE_FLOATS * 4, M, K, m0, (long long)next * AK_BK, tid);
      load_b_tile(B, sb0 + ns * AK_B_STAGE_FLOATS * 4, K, N, (long long)next * AK_BK, n0, b_vec, tid);
    }
    cp_async_commit();

    const float* as = As + stage * AK_A_STAGE_FLOATS + wm0 + lm * 4;
    const float* bs = Bs + stage * AK_B_STAGE_FLOATS + wn0 + ln * 4;
#pragma unroll
    for (int k = 0; k < AK_BK; ++k) {
      float af[AK_TM];
      float bf[AK_TN];
#pragma unroll
      for (int gi = 0; gi < AK_TM / 4; ++gi) {
        const float4 v = *(const float4*)(as + k * AK_A_LD + gi * 4 * AK_LANES_M);
        af[gi * 4 + 0] = v.x;
        af[gi * 4 + 1] = v.y;
        af[gi * 4 + 2] = v.z;
        af[gi * 4 + 3] = v.w;
      }
#pragma unroll
      for (int gj = 0; gj < AK_TN / 4; ++gj) {
        const float4 v = *(const float4*)(bs + k * AK_BN + gj * 4 * AK_LANES_N);
        bf[gj * 4 + 0] = v.x;
        bf[gj * 4 + 1] = v.y;
        bf[gj * 4 + 2] = v.z;
        bf[gj * 4 + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < AK_TM; ++i)
#pragma unroll
        for (int j = 0; j < AK_TN; ++j) acc[i][j] = fmaf(af[i], bf[j], acc[i][j]);
    }
    stage = stage + 1 == AK_STAGES ? 0 : stage + 1;
  }
  cp_async_wait<0>();

  const bool c_vec = (N & 3) == 0 && ((unsigned long long)c & 15) == 0;
#pragma unroll
  for (int gi = 0; gi < AK_TM / 4; ++gi) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const long long row = m0 + wm0 + gi * 4 * AK_LANES_M + lm * 4 + r;
      if (row >= M) continue;
#pragma unroll
      for (int gj = 0; gj < AK_TN / 4; ++gj) {
        const long long col = n0 + wn0 + gj * 4 * AK_LANES_N + ln * 4;
        float v[4] = {acc[gi * 4 + r][gj * 4], acc[gi * 4 + r][gj * 4 + 1], acc[gi * 4 + r][gj * 4 + 2],
                      acc[gi * 4 + r][gj * 4 + 3]};
        float* p = C + row * N + col;
        if (gate) {
          const float* q = (const float*)gate + row * N + col;
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (col + e < N) v[e] = gated(q[e], v[e]);
        }
        if (c_vec && col + 3 < N) {
          *(float4*)p = make_float4(v[0], v[1], v[2], v[3]);
        } else {
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (col + e < N) p[e] = v[e];
        }
      }
    }
  }
}
#endif

#if AK_DTYPE == 0
// This block's tiles of C = A @ B, gated when gate is not null.
__device__ __forceinline__ void gemm_tile(const void* a, const void* b, void* c, const void* gate, long long M,
                                          long long N, long long K, unsigned char* smem) {
  const long long tiles = tile_count(M, N);
  for (long long pid = blockIdx.x; pid < tiles; pid += gridDim.x) {
    if (pid != blockIdx.x) __syncthreads();  // everyone is done with the previous tile's shared memory
    gemm_one(pid, a, b, c, gate, M, N, K, smem);
  }
}
#endif

#ifndef AK_MATMUL_NO_ENTRY
extern "C" __global__ void __launch_bounds__(AK_BLOCK_THREADS)
    ak_matmul(const void* a, const void* b, void* c, long long M, long long N, long long K) {
  extern __shared__ __align__(1024) unsigned char smem[];  // wgmma.cuh: swizzle period
  gemm_tile(a, b, c, nullptr, M, N, K, smem);
}
#endif
