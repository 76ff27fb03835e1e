// Scaled dot-product attention softmax(Q K^T / sqrt(D)) V, CUDA starter candidate in the manner of
// FlashAttention-2 (compiled by NVRTC: device code only; the one include is inlined by
// kernels/embed.cmake). With AK_CAUSAL=1 (flash_attention_causal's starter is this text behind
// "#define AK_CAUSAL 1"), query i attends to keys j <= i only.
//
// Contract (kernels/flash_attention/spec.cc):
//   extern "C" __global__ void ak_flash_attention(const void* q, const void* k, const void* v,
//       void* out, long long batch, long long heads, long long seq, long long head_dim)
//   q, k, v, out: [batch, heads, seq, head_dim], contiguous, one dtype (-DAK_DTYPE=0|1|2: fp32,
//   fp16, bf16), 16-byte aligned base pointers (PyTorch's allocations are). head_dim a multiple of
//   8 in [8, 128]; any seq >= 1. Scores, softmax and the output accumulate in fp32; the output is
//   rounded once. Every element of out is written, nothing else is, no atomics: the result is
//   bitwise identical from run to run. A shape outside the contract returns at once (the output
//   stays as it was), never faults.
//
// Launch geometry (the harness computes it from the tunables and the shape):
//   block = AK_WARPS * 32 threads, 1-D
//   grid  = (ceil(seq / AK_BLOCK_M) * batch * heads, 1, 1); block b takes query tile
//           ceil(seq / AK_BLOCK_M) - 1 - b / (batch * heads) of head b % (batch * heads), so the
//           last (for causal: the longest) query tiles start first; with AK_HEAD_MAJOR=1, tile
//           q_tiles - 1 - b % q_tiles of head b / q_tiles (q_tiles = ceil(seq / AK_BLOCK_M)): the
//           blocks resident at one time share a few heads' K and V in L2, each head's longest
//           tiles first.
//   dynamic shared memory [bytes] = (AK_BLOCK_M + 2 * AK_STAGES * AK_BLOCK_N) * P * E
//           P = 64 if head_dim <= 64, else 128 (the padded head dim); E = 4 for fp32, 2 otherwise
//           (the harness sets CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES before the first launch),
//           plus 1024 with AK_WGMMA 1 to 4 in fp16/bf16 (the start rounded to the swizzle period);
//           AK_WGMMA=3 or 4 (fp16/bf16): block = AK_WARPS * 32 + 128 threads (a producer warpgroup).
//
// Algorithm. A block owns AK_BLOCK_M query rows of one head and walks the keys in tiles of
// AK_BLOCK_N rows of K and V (causal: only the tiles up to the block's last query). Its Q tile
// stays in shared memory; K and V tiles arrive through rings of AK_STAGES buffers each, filled by
// cp.async, in the order K0 V0 K1 V1 ...: while the scores of tile j are formed, V_j (and with two
// stages V_{j+1}) is in flight, and while P V_j accumulates, K_{j+1} (K_{j+2}) is. Each warp owns
// AK_BLOCK_M / AK_WARPS query rows and keeps their running max, sum and output in registers
// (online softmax, FlashAttention-2's order: the output is divided by the sum once at the end).
// Exponents are exp2(fma(s, c, -m c)) with c = log2(e) / sqrt(head_dim): s c is never rounded on
// its own, and the rounded m c of a row is the same in every exponent and rescale factor of the
// row, so its rounding cancels in the division by the sum.
//   fp16/bf16: tensor cores, mma.sync m16n8k16 with fp32 accumulators. S = Q K^T takes Q (A, row
//     major) and K (B, stored [key][d], which is B's "col" layout) by plain ldmatrix; the S
//     accumulators of two adjacent n8 tiles are, after exp2 and packing pairs to f16x2/bf16x2,
//     exactly the A fragment of P for one k16 step of P V, so P never leaves the registers; V
//     (B, stored [key][d] = row major) comes by ldmatrix.trans. Tiles keep rows of 16-byte
//     chunks whose index is XORed with the row's low three bits, so the eight rows of an
//     ldmatrix phase hit distinct banks.
//   fp32: the same pipeline and softmax with SIMT FFMA (no TF32). Lane 8 * rg + cg of a warp
//     owns the warp's rows rg + 4 r, keys cg + 8 n of each score tile and the output columns of
//     16-byte chunks cg + 8 i; scores read Q and K as float4 from shared memory, and P V takes
//     each probability from its owner by a shuffle.
// head_dim is padded to P with zeros (copies of chunks past head_dim are zero-filled, as are
// rows past seq); key columns past seq, and for causal past the query, get -inf before the
// softmax. A warp skips a causal tile all of whose keys lie after its last query.
//
// NaN: a NaN in q makes its row's output NaN; in k (v) it makes every output of the head (of the
// NaN's column) NaN, except causal rows that never reach its key. Row maxima use fmaxf, which
// ignores NaN; the NaN then reaches the output through its exponent.
//
// Tunables (default; values for the search space):
//   AK_BLOCK_M     query rows per block                  128  {64, 128}
//   AK_BLOCK_N     keys per K/V tile                     64   {32, 64, 128}
//   AK_WARPS       warps per block                       8    {4, 8}
//   AK_STAGES      K (and V) buffers in the ring         2    {1, 2}
//   AK_MIN_BLOCKS  blocks per SM asked of ptxas          1    {1, 2}
//                  (__launch_bounds__): 2 caps registers at 65536 / (2 * threads), 128 at 8
//                  warps, which spills a little at the default tile (fp16: 72 bytes) but lets
//                  two blocks share an SM where shared memory allows
//   AK_WGMMA       warpgroup MMA (sm_90a, fp16/bf16)     0    {0, 1, 2, 3, 4}
//                  1: both products by wgmma (wgmma.cuh), one warpgroup per 64 query rows
//                  (AK_BLOCK_M / AK_WARPS = 16); 2: the same with a tile's softmax overlapping
//                  the previous tile's P V product (AK_STAGES = 2); 3: 2's order with Q, K and V
//                  brought in by TMA from a producer warpgroup of 128 more threads in every block
//                  (wgmma_tma.cuh), where the sandbox gave the call its tensor maps, otherwise the
//                  mma.sync path; 4: 3 with the two computing warpgroups taking turns to issue
//                  their products (AK_WARPS = 8).
//                  Ignored below sm_90a (but for the idle producer warpgroup), refused for fp32.
//                  The dynamic shared memory grows by 1 KiB (its start is rounded up to 1024 bytes).
//   AK_HEAD_MAJOR  block order (launch geometry above)   0    {0, 1}
//                  0: a tile of every head, then the next tile; 1: a head's tiles together
// Rejected at compile time (#error), so the compile stage drops them from a sweep: a value outside
// those sets; AK_BLOCK_M / AK_WARPS other than 16 or 32 (rows per warp: one or two m16 tiles);
// shared memory for head_dim 128 (formula above) over 227 KiB (fp32 with AK_BLOCK_N = 128 and two
// stages). The defaults suit every dtype: 16 rows a warp keep fp16/bf16 at 64 output and 32 score
// accumulators a thread (D = 128), fp32 at 64 and 32.

#ifndef AK_CAUSAL
#define AK_CAUSAL 0
#endif
#ifndef AK_BLOCK_M
#define AK_BLOCK_M 128
#endif
#ifndef AK_BLOCK_N
#define AK_BLOCK_N 64
#endif
#ifndef AK_WARPS
#define AK_WARPS 8
#endif
#ifndef AK_STAGES
#define AK_STAGES 2
#endif
#ifndef AK_MIN_BLOCKS
#define AK_MIN_BLOCKS 1
#endif
#ifndef AK_WGMMA
#define AK_WGMMA 0
#endif
#ifndef AK_HEAD_MAJOR
#define AK_HEAD_MAJOR 0
#endif
#if AK_HEAD_MAJOR != 0 && AK_HEAD_MAJOR != 1
#error "AK_HEAD_MAJOR must be 0 or 1"
#endif

#define AK_THREADS (AK_WARPS * 32)
#define AK_WARP_ROWS (AK_BLOCK_M / AK_WARPS)  // query rows per warp

#if AK_BLOCK_M != 64 && AK_BLOCK_M != 128
#error "AK_BLOCK_M must be 64 or 128"
#endif
#if AK_BLOCK_N != 32 && AK_BLOCK_N != 64 && AK_BLOCK_N != 128
#error "AK_BLOCK_N must be 32, 64 or 128"
#endif
#if AK_WARPS != 4 && AK_WARPS != 8
#error "AK_WARPS must be 4 or 8"
#endif
#if AK_STAGES != 1 && AK_STAGES != 2
#error "AK_STAGES must be 1 or 2"
#endif
#if AK_MIN_BLOCKS != 1 && AK_MIN_BLOCKS != 2
#error "AK_MIN_BLOCKS must be 1 or 2"
#endif
#if AK_WARP_ROWS != 16 && AK_WARP_ROWS != 32
#error "AK_BLOCK_M / AK_WARPS (query rows per warp) must be 16 or 32"
#endif
#if AK_WGMMA != 0 && AK_WGMMA != 1 && AK_WGMMA != 2 && AK_WGMMA != 3 && AK_WGMMA != 4
#error "AK_WGMMA must be 0, 1, 2, 3 or 4"
#endif
#if AK_WGMMA == 4 && AK_WARPS != 8
#error "AK_WGMMA=4 needs AK_WARPS = 8 (two computing warpgroups to take turns)"
#endif

#include "../common/elem.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "ak_flash_attention needs sm_80 or newer (cp.async, bf16 mma.sync)"
#endif

#if AK_DTYPE == 0 && AK_WGMMA
#error "AK_WGMMA=1, 2, 3 or 4 is for fp16/bf16 (fp32 runs the SIMT path either way)"
#endif

// AK_WGMMA=3 and 4: a producer warpgroup follows the AK_THREADS computing threads (wgmma_tma.cuh) on
// every GPU; the other paths leave it idle (it returns at once), and their barriers count the
// computing threads only (named barrier 1; 0 is __syncthreads').
#if AK_WGMMA >= 3
#define AK_BLOCK_THREADS (AK_THREADS + 128)
#else
#define AK_BLOCK_THREADS AK_THREADS
#endif
__device__ __forceinline__ void fa_sync() {
#if AK_WGMMA >= 3
  asm volatile("bar.sync 1, %0;\n" ::"n"(AK_THREADS) : "memory");
#else
  __syncthreads();
#endif
}

#define AK_ELEM_BYTES (AK_DTYPE == 0 ? 4 : 2)
#define AK_CHUNK_ELEMS (16 / AK_ELEM_BYTES)  // elements per 16-byte chunk
#define AK_MAX_HEAD_DIM 128
#if (AK_BLOCK_M + 2 * AK_STAGES * AK_BLOCK_N) * AK_MAX_HEAD_DIM * AK_ELEM_BYTES + (AK_WGMMA ? 1024 : 0) > 227 * 1024
#error "the Q tile and the K/V rings exceed 227 KiB of shared memory at head_dim 128; lower AK_BLOCK_N or AK_STAGES"
#endif

#define AK_NEG_INF __int_as_float(0xff800000)

// Per thread: kRows query rows, kScores scores of each in a K/V tile, kOuts(P) output columns.
#if AK_DTYPE == 0
#define AK_ROWS (AK_WARP_ROWS / 4)
#define AK_SCORES (AK_BLOCK_N / 8)
#define AK_OUTS(P) ((P) / 8)
#else
#define AK_MT (AK_WARP_ROWS / 16)  // m16 tiles per warp
#define AK_ROWS (2 * AK_MT)
#define AK_SCORES (AK_BLOCK_N / 4)
#define AK_OUTS(P) ((P) / 4)
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

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// 2^x; 2^-inf = 0, NaN stays NaN.
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Reductions over the lanes that share a query row: the 4 of a quad (fp16/bf16 accumulator
// layout) or the 8 of an octet (fp32 layout).
__device__ __forceinline__ float row_max(float x) {
#if AK_DTYPE == 0
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 4));
#endif
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return x;
}

__device__ __forceinline__ float row_sum(float x) {
#if AK_DTYPE == 0
  x += __shfl_xor_sync(0xffffffffu, x, 4);
#endif
  x += __shfl_xor_sync(0xffffffffu, x, 2);
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x;
}

// Byte offset of 16-byte chunk c of row r in a tile of kChunks (>= 8) chunks a row: the chunk's
// low three index bits are XORed with the row's, so chunk c of eight consecutive rows falls in
// eight distinct bank groups (ldmatrix phases, fp32 float4 reads of eight rows).
template <int kChunks>
__device__ __forceinline__ unsigned swizzle(int r, int c) {
  return (unsigned)(r * kChunks + (c ^ (r & 7))) * 16u;
}

// Byte offset of 16-byte chunk c of row r in a tile of kRows rows, kChunks chunks a row. kWg 0:
// attend's layout (swizzle above); 1: the wgmma paths' (wgmma.cuh), blocks of 64 columns of
// 16-bit elements (128 bytes a row), each holding its kRows rows, chunk c % 8 XORed with r % 8.
template <int kRows, int kChunks, int kWg>
__device__ __forceinline__ unsigned tile_offset(int r, int c) {
  if (kWg) return (unsigned)((c >> 3) * (kRows * 128) + r * 128 + (((c & 7) ^ (r & 7)) << 4));
  return swizzle<kChunks>(r, c);
}

// Rows [0, kRows) of a tile whose rows have d elements (row stride d) into shared memory at dst,
// kChunks chunks a row, in layout kWg (tile_offset). Rows at or past rows_left and chunks past d
// are zero-filled, their source never read (any: a valid address to name instead).
template <int kRows, int kChunks, int kWg = 0>
__device__ __forceinline__ void copy_tile(unsigned dst, const elem_t* src, const elem_t* any, long long rows_left,
                                          int d) {
  constexpr int kTotal = kRows * kChunks;
#pragma unroll
  for (int i = 0; i < (kTotal + AK_THREADS - 1) / AK_THREADS; ++i) {
    const int id = (int)threadIdx.x + i * AK_THREADS;
    if (kTotal % AK_THREADS != 0 && id >= kTotal) break;
    const int r = id / kChunks;
    const int c = id % kChunks;
    const bool ok = r < rows_left && c * AK_CHUNK_ELEMS < d;
    cp_async16(dst + tile_offset<kRows, kChunks, kWg>(r, c),
               ok ? (const void*)(src + (long long)r * d + c * AK_CHUNK_ELEMS) : (const void*)any, ok ? 16u : 0u);
  }
}

// The K and V rings of one head in shared memory (sk, sv: AK_STAGES buffers each) and their
// copies, in layout kWg. One commit group per tile, empty past the last (tiles), so that K_j and
// V_j always have 2 (S - 1) newer groups in flight when they are waited for: the order is
// K0 V0 K1 V1 ...
template <int P, int kWg>
struct KvRing {
  static constexpr int kChunks = P / AK_CHUNK_ELEMS;
  static constexpr unsigned kBytes = AK_BLOCK_N * P * AK_ELEM_BYTES;  // one K or V buffer
  const elem_t* K;
  const elem_t* V;
  long long seq;
  int d;
  int tiles;
  unsigned sk, sv;

  __device__ __forceinline__ void load_k(int j) const { load(sk, K, j); }
  __device__ __forceinline__ void load_v(int j) const { load(sv, V, j); }
  // The Q tile [AK_BLOCK_M rows from q0] at sq (joining K0's group), then K0, V0, K1, ... up to
  // K_{S-1}.
  __device__ __forceinline__ void start(unsigned sq, const elem_t* Q, long long q0) const {
    copy_tile<AK_BLOCK_M, kChunks, kWg>(sq, Q + q0 * d, Q, seq - q0, d);
    load_k(0);
#pragma unroll
    for (int j = 1; j < AK_STAGES; ++j) {
      load_v(j - 1);
      load_k(j);
    }
  }

 private:
  __device__ __forceinline__ void load(unsigned base, const elem_t* M, int j) const {
    if (j < tiles)
      copy_tile<AK_BLOCK_N, kChunks, kWg>(base + (unsigned)(j % AK_STAGES) * kBytes, M + (long long)j * AK_BLOCK_N * d,
                                          M, seq - (long long)j * AK_BLOCK_N, d);
    cp_async_commit();
  }
};

#if AK_DTYPE != 0
// ---- fp16 / bf16: tensor cores ------------------------------------------------------------
// Accumulator layout of m16n8 (lane = 4 g + t): rows g and g + 8, columns 2t and 2t + 1. Thread
// row r is m16 tile r / 2, row g + 8 (r % 2); score n and output n are n8 tile n / 2, column
// 2t + n % 2.

__device__ __forceinline__ int row_of(int r, int lane) { return (r >> 1) * 16 + (lane >> 2) + (r & 1) * 8; }
__device__ __forceinline__ int key_of(int n, int lane) { return (n >> 1) * 8 + 2 * (lane & 3) + (n & 1); }

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// d = a b + d for one m16n8k16 tile; d0..d3 in accumulator order (row g: d0, d1; row g + 8: d2, d3).
__device__ __forceinline__ void mma16816(float& d0, float& d1, float& d2, float& d3, const unsigned (&a)[4],
                                         unsigned b0, unsigned b1) {
#if AK_DTYPE == 1
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// Two values rounded to the dtype and packed, lo in the low half (cvt puts its first source high).
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
  unsigned r;
#if AK_DTYPE == 1
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#endif
  return r;
}

// ldmatrix addresses: lane l names row l % 16 of a 16-row block and 8-column half l / 16, i.e.
// the four 8x8 matrices in the order rows 0-7 / 8-15 at columns 0-7, then at columns 8-15. The
// swizzled column of half h at k16 step kk is ((2 kk + h) ^ (row & 7)) * 16 bytes; every block
// starts at a multiple of 8 rows, so row & 7 = l & 7 and the offset is half_col ^ (kk << 5).
__device__ __forceinline__ unsigned half_col(int lane) { return (unsigned)(((lane >> 4) ^ (lane & 7)) << 4); }

// s = Q K^T for the warp's rows and one K tile (raw scores, unscaled).
template <int P>
__device__ __forceinline__ void tile_scores(float (&s)[AK_ROWS][AK_SCORES], unsigned sq, unsigned sk, int wr0,
                                            int lane) {
  constexpr unsigned kRowBytes = P * 2;
  const unsigned hc = half_col(lane);
  const unsigned q_row = sq + (unsigned)(wr0 + (lane & 15)) * kRowBytes;
  const unsigned k_row = sk + (unsigned)(lane & 15) * kRowBytes;
#pragma unroll
  for (int r = 0; r < AK_ROWS; ++r)
#pragma unroll
    for (int n = 0; n < AK_SCORES; ++n) s[r][n] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < P / 16; ++kk) {
    const unsigned col = hc ^ (unsigned)(kk << 5);
    unsigned qa[AK_MT][4];
#pragma unroll
    for (int mt = 0; mt < AK_MT; ++mt) ldmatrix_x4(qa[mt], q_row + (unsigned)(mt * 16) * kRowBytes + col);
#pragma unroll
    for (int np = 0; np < AK_BLOCK_N / 16; ++np) {
      // keys 16 np + 0..15: registers 0 and 2 are n8 tile 2 np (d 0-7, 8-15), 1 and 3 tile 2 np + 1
      unsigned kb[4];
      ldmatrix_x4(kb, k_row + (unsigned)(np * 16) * kRowBytes + col);
#pragma unroll
      for (int mt = 0; mt < AK_MT; ++mt) {
        mma16816(s[2 * mt][4 * np], s[2 * mt][4 * np + 1], s[2 * mt + 1][4 * np], s[2 * mt + 1][4 * np + 1], qa[mt],
                 kb[0], kb[2]);
        mma16816(s[2 * mt][4 * np + 2], s[2 * mt][4 * np + 3], s[2 * mt + 1][4 * np + 2], s[2 * mt + 1][4 * np + 3],
                 qa[mt], kb[1], kb[3]);
      }
    }
  }
}

// o += P V for one V tile; p holds the probabilities in the score layout.
template <int P>
__device__ __forceinline__ void tile_accumulate(float (&o)[AK_ROWS][AK_OUTS(P)], const float (&p)[AK_ROWS][AK_SCORES],
                                                unsigned sv, int lane) {
  constexpr unsigned kRowBytes = P * 2;
  const unsigned hc = half_col(lane);
  const unsigned v_row = sv + (unsigned)(lane & 15) * kRowBytes;
#pragma unroll
  for (int kk = 0; kk < AK_BLOCK_N / 16; ++kk) {
    // The C fragments of n8 tiles 2 kk and 2 kk + 1 are the A fragment of keys 16 kk + 0..15:
    // a0 = row g, keys 2t.. (tile 2 kk); a1 = row g + 8 (tile 2 kk); a2, a3 the same of tile 2 kk + 1.
    unsigned pa[AK_MT][4];
#pragma unroll
    for (int mt = 0; mt < AK_MT; ++mt) {
      pa[mt][0] = pack2(p[2 * mt][4 * kk], p[2 * mt][4 * kk + 1]);
      pa[mt][1] = pack2(p[2 * mt + 1][4 * kk], p[2 * mt + 1][4 * kk + 1]);
      pa[mt][2] = pack2(p[2 * mt][4 * kk + 2], p[2 * mt][4 * kk + 3]);
      pa[mt][3] = pack2(p[2 * mt + 1][4 * kk + 2], p[2 * mt + 1][4 * kk + 3]);
    }
#pragma unroll
    for (int dp = 0; dp < P / 16; ++dp) {
      // keys 16 kk + 0..15, d 16 dp + 0..15, transposed: registers 0 and 1 are n8 tile 2 dp
      // (keys 0-7, 8-15), 2 and 3 tile 2 dp + 1
      unsigned vb[4];
      ldmatrix_x4_trans(vb, v_row + (unsigned)(kk * 16) * kRowBytes + (hc ^ (unsigned)(dp << 5)));
#pragma unroll
      for (int mt = 0; mt < AK_MT; ++mt) {
        mma16816(o[2 * mt][4 * dp], o[2 * mt][4 * dp + 1], o[2 * mt + 1][4 * dp], o[2 * mt + 1][4 * dp + 1], pa[mt],
                 vb[0], vb[1]);
        mma16816(o[2 * mt][4 * dp + 2], o[2 * mt][4 * dp + 3], o[2 * mt + 1][4 * dp + 2], o[2 * mt + 1][4 * dp + 3],
                 pa[mt], vb[2], vb[3]);
      }
    }
  }
}

// Output columns n and n + 1 (n even) of thread row r, scaled by inv, if inside head_dim d.
template <int P>
__device__ __forceinline__ void store_row(elem_t* __restrict__ out, const float (&o)[AK_OUTS(P)], float inv, int d,
                                          int lane) {
#pragma unroll
  for (int nd = 0; nd < P / 8; ++nd)
    if (nd * 8 < d)
      *(unsigned*)(out + nd * 8 + 2 * (lane & 3)) = pack2(o[2 * nd] * inv, o[2 * nd + 1] * inv);
}

#else
// ---- fp32: SIMT FFMA ----------------------------------------------------------------------
// Lane = 8 rg + cg. Thread row r is warp row rg + 4 r; score n is key cg + 8 n of the tile;
// output n is column 4 (cg + 8 (n / 4)) + n % 4.

__device__ __forceinline__ int row_of(int r, int lane) { return (lane >> 3) + 4 * r; }
__device__ __forceinline__ int key_of(int n, int lane) { return (lane & 7) + 8 * n; }

__device__ __forceinline__ float4 lds128(unsigned addr) {
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(addr));
  return v;
}

template <int P>
__device__ __forceinline__ void tile_scores(float (&s)[AK_ROWS][AK_SCORES], unsigned sq, unsigned sk, int wr0,
                                            int lane) {
  constexpr int kChunks = P / 4;
  const int rg = lane >> 3;
  const int cg = lane & 7;
#pragma unroll
  for (int r = 0; r < AK_ROWS; ++r)
#pragma unroll
    for (int n = 0; n < AK_SCORES; ++n) s[r][n] = 0.0f;
#pragma unroll 2
  for (int c = 0; c < kChunks; ++c) {
    float4 qv[AK_ROWS];
#pragma unroll
    for (int r = 0; r < AK_ROWS; ++r) qv[r] = lds128(sq + swizzle<kChunks>(wr0 + rg + 4 * r, c));
#pragma unroll
    for (int n = 0; n < AK_SCORES; ++n) {
      const float4 kv = lds128(sk + swizzle<kChunks>(cg + 8 * n, c));
#pragma unroll
      for (int r = 0; r < AK_ROWS; ++r) {
        float a = s[r][n];
        a = fmaf(qv[r].x, kv.x, a);
        a = fmaf(qv[r].y, kv.y, a);
        a = fmaf(qv[r].z, kv.z, a);
        s[r][n] = fmaf(qv[r].w, kv.w, a);
      }
    }
  }
}

template <int P>
__device__ __forceinline__ void tile_accumulate(float (&o)[AK_ROWS][AK_OUTS(P)], const float (&p)[AK_ROWS][AK_SCORES],
                                                unsigned sv, int lane) {
  constexpr int kChunks = P / 4;
  const int cg = lane & 7;
#pragma unroll
  for (int n = 0; n < AK_SCORES; ++n) {
#pragma unroll 2
    for (int owner = 0; owner < 8; ++owner) {  // key owner + 8 n, held by lane 8 rg + owner
      float pk[AK_ROWS];
#pragma unroll
      for (int r = 0; r < AK_ROWS; ++r) pk[r] = __shfl_sync(0xffffffffu, p[r][n], (lane & 24) | owner);
      const int key = owner + 8 * n;
#pragma unroll
      for (int i = 0; i < P / 32; ++i) {
        const float4 vv = lds128(sv + swizzle<kChunks>(key, cg + 8 * i));
#pragma unroll
        for (int r = 0; r < AK_ROWS; ++r) {
          o[r][4 * i] = fmaf(pk[r], vv.x, o[r][4 * i]);
          o[r][4 * i + 1] = fmaf(pk[r], vv.y, o[r][4 * i + 1]);
          o[r][4 * i + 2] = fmaf(pk[r], vv.z, o[r][4 * i + 2]);
          o[r][4 * i + 3] = fmaf(pk[r], vv.w, o[r][4 * i + 3]);
        }
      }
    }
  }
}

template <int P>
__device__ __forceinline__ void store_row(float* __restrict__ out, const float (&o)[AK_OUTS(P)], float inv, int d,
                                          int lane) {
#pragma unroll
  for (int i = 0; i < P / 32; ++i) {
    const int chunk = (lane & 7) + 8 * i;
    if (chunk * 4 < d)
      *(float4*)(out + chunk * 4) = make_float4(o[4 * i] * inv, o[4 * i + 1] * inv, o[4 * i + 2] * inv, o[4 * i + 3] * inv);
  }
}
#endif

// The online softmax's state before the first key: no output, no sum, a max of -inf.
template <int P>
__device__ __forceinline__ void start_rows(float (&o)[AK_ROWS][AK_OUTS(P)], float (&mc)[AK_ROWS], float (&l)[AK_ROWS]) {
#pragma unroll
  for (int r = 0; r < AK_ROWS; ++r) {
    mc[r] = AK_NEG_INF;
    l[r] = 0.0f;
#pragma unroll
    for (int n = 0; n < AK_OUTS(P); ++n) o[r][n] = 0.0f;
  }
}

// The thread's rows of the output, each divided by its sum; row0: the warp's first query.
template <int P>
__device__ __forceinline__ void store_rows(elem_t* __restrict__ O, const float (&o)[AK_ROWS][AK_OUTS(P)],
                                           const float (&l)[AK_ROWS], long long row0, long long seq, int d, int lane) {
#pragma unroll
  for (int r = 0; r < AK_ROWS; ++r) {
    const float inv = 1.0f / row_sum(l[r]);
    const long long row = row0 + row_of(r, lane);
    if (row < seq) store_row<P>(O + row * d, o[r], inv, d, lane);
  }
}

// Masking and online softmax of one tile's scores (k0: its first key; wr0: the warp's first row): s becomes the
// exponentials, mc and l move on, alpha is each row's rescale factor for the output so far.
__device__ __forceinline__ void tile_softmax(float (&s)[AK_ROWS][AK_SCORES], float (&mc)[AK_ROWS], float (&l)[AK_ROWS],
                                             float (&alpha)[AK_ROWS], long long k0, long long seq, long long q0,
                                             int wr0, float c, int lane) {
  if (k0 + AK_BLOCK_N > seq || (AK_CAUSAL && k0 + AK_BLOCK_N - 1 > q0 + wr0)) {
    const long long keys_left = seq - k0;
    const long long diag = q0 + wr0 - k0;  // key k of the tile is after row r if k > r + diag
#pragma unroll
    for (int r = 0; r < AK_ROWS; ++r)
#pragma unroll
      for (int n = 0; n < AK_SCORES; ++n) {
        const int key = key_of(n, lane);
        if (key >= keys_left || (AK_CAUSAL && key > row_of(r, lane) + diag)) s[r][n] = AK_NEG_INF;
      }
  }
#pragma unroll
  for (int r = 0; r < AK_ROWS; ++r) {
    float mx = s[r][0];
#pragma unroll
    for (int n = 1; n < AK_SCORES; ++n) mx = fmaxf(mx, s[r][n]);
    const float mc_new = fmaxf(mc[r], row_max(mx) * c);
    const float off = mc_new == AK_NEG_INF ? 0.0f : mc_new;  // a row with no key yet
    alpha[r] = ex2(mc[r] - off);                             // 0 for the first keys of a row
    mc[r] = mc_new;
    float sum = 0.0f;
#pragma unroll
    for (int n = 0; n < AK_SCORES; ++n) {
      const float e = ex2(fmaf(s[r][n], c, -off));
      s[r][n] = e;
      sum += e;
    }
    l[r] = fmaf(l[r], alpha[r], sum);
  }
}

template <int P>
__device__ __forceinline__ void rescale(float (&o)[AK_ROWS][AK_OUTS(P)], const float (&alpha)[AK_ROWS]) {
#pragma unroll
  for (int r = 0; r < AK_ROWS; ++r)
#pragma unroll
    for (int n = 0; n < AK_OUTS(P); ++n) o[r][n] *= alpha[r];
}

#if AK_DTYPE != 0
#include "../flash_attention/wgmma.cuh"
#include "../flash_attention/wgmma_tma.cuh"
#endif

// ---- the block's query tile ---------------------------------------------------------------

// Q, K, V, O: the head's [seq, d] matrices; q0: the tile's first query; P: d padded (64 or 128).
template <int P>
__device__ __forceinline__ void attend(const elem_t* __restrict__ Q, const elem_t* __restrict__ K,
                                       const elem_t* __restrict__ V, elem_t* __restrict__ O, long long seq, int d,
                                       long long q0, unsigned sbase) {
  constexpr unsigned kRowBytes = P * AK_ELEM_BYTES;
  constexpr unsigned kKVBytes = AK_BLOCK_N * kRowBytes;  // one K or V buffer
  const unsigned sq = sbase;
  const unsigned sk = sq + AK_BLOCK_M * kRowBytes;
  const unsigned sv = sk + AK_STAGES * kKVBytes;
  const int lane = (int)threadIdx.x & 31;
  const int wr0 = ((int)threadIdx.x >> 5) * AK_WARP_ROWS;  // the warp's first row in the tile
  const float c = 1.4426950408889634f / sqrtf((float)d);    // log2(e) / sqrt(d)

  const long long kv_end = AK_CAUSAL && q0 + AK_BLOCK_M < seq ? q0 + AK_BLOCK_M : seq;
  const int kv_tiles = (int)((kv_end + AK_BLOCK_N - 1) / AK_BLOCK_N);

  const KvRing<P, 0> ring{K, V, seq, d, kv_tiles, sk, sv};
  ring.start(sq, Q, q0);

  float o[AK_ROWS][AK_OUTS(P)];
  float mc[AK_ROWS];  // running max of each row times c (-inf: none yet)
  float l[AK_ROWS];   // this thread's part of each row's sum of exponentials
  start_rows<P>(o, mc, l);

  for (int j = 0; j < kv_tiles; ++j) {
    const long long k0 = (long long)j * AK_BLOCK_N;
    const unsigned stage = (unsigned)(j % AK_STAGES) * kKVBytes;
    // Causal: a tile whose first key comes after the warp's last query adds nothing to its rows.
    const bool active = !AK_CAUSAL || k0 <= q0 + wr0 + AK_WARP_ROWS - 1;

    cp_async_wait<2 * (AK_STAGES - 1)>();  // K_j has landed (this thread's copies) ...
    fa_sync();                             // ... everyone's; every warp is done with V_{j-1}
    ring.load_v(j + AK_STAGES - 1);

    float s[AK_ROWS][AK_SCORES];
    if (active) {
      tile_scores<P>(s, sq, sk + stage, wr0, lane);

      float alpha[AK_ROWS];
      tile_softmax(s, mc, l, alpha, k0, seq, q0, wr0, c, lane);
      rescale<P>(o, alpha);
    }

    cp_async_wait<2 * (AK_STAGES - 1)>();  // V_j has landed ...
    fa_sync();                             // ... everyone's; every warp is done with K_j
    ring.load_k(j + AK_STAGES);

    if (active) tile_accumulate<P>(o, s, sv + stage, lane);
  }
  cp_async_wait<0>();  // no copy may still target shared memory when the block exits
  store_rows<P>(O, o, l, q0 + wr0, seq, d, lane);
}

#if defined(AK_FA_TMA_ON) && AK_FA_TMA_ON
// AK_WGMMA=3 or 4 where a call has no tensor maps (wgmma_tma.cuh): the mma.sync path, out of line.
// Inlined, its registers would spill into the TMA path's (which has setmaxnreg's 240, the rest of
// the kernel 168); and a wgmma path in a called function would have ptxas serialise every wgmma of
// the kernel (its warning C7510). The sandbox gives every call whose tensors TMA can describe its
// maps (as does the torch library of models/plug), so this is for tensors TMA cannot describe and a
// driver without TMA.
__device__ __noinline__ void attend_without_maps(const elem_t* __restrict__ Q, const elem_t* __restrict__ K,
                                                 const elem_t* __restrict__ V, elem_t* __restrict__ O, long long seq,
                                                 int d, long long q0, unsigned sbase) {
  if (d <= 64)
    attend<64>(Q, K, V, O, seq, d, q0, sbase);
  else
    attend<128>(Q, K, V, O, seq, d, q0, sbase);
}
#endif

#if AK_MIN_BLOCKS > 1
#define AK_LAUNCH_BOUNDS __launch_bounds__(AK_BLOCK_THREADS, AK_MIN_BLOCKS)
#else
#define AK_LAUNCH_BOUNDS __launch_bounds__(AK_BLOCK_THREADS)
#endif

extern "C" __global__ void AK_LAUNCH_BOUNDS
ak_flash_attention(const void* q, const void* k, const void* v, void* out, long long batch, long long heads,
                   long long seq, long long head_dim) {
  extern __shared__ __align__(128) unsigned char smem[];
  if (head_dim < 8 || head_dim > AK_MAX_HEAD_DIM || (head_dim & 7) != 0 || seq < 1 || batch < 1 || heads < 1) return;
  const long long bh_count = batch * heads;
  const long long q_tiles = (seq + AK_BLOCK_M - 1) / AK_BLOCK_M;
  const long long b = blockIdx.x;
  if (b >= q_tiles * bh_count) return;
#if AK_HEAD_MAJOR
  const long long bh = b / q_tiles;  // a head's tiles one after another
  const long long q0 = (q_tiles - 1 - b % q_tiles) * AK_BLOCK_M;
#else
  const long long bh = b % bh_count;  // a tile of every head, then the next tile
  const long long q0 = (q_tiles - 1 - b / bh_count) * AK_BLOCK_M;
#endif
  const long long head = bh * seq * head_dim;  // offset of the head's matrices
  const elem_t* Q = (const elem_t*)q + head;
  const elem_t* K = (const elem_t*)k + head;
  const elem_t* V = (const elem_t*)v + head;
  elem_t* O = (elem_t*)out + head;
  const int d = (int)head_dim;
#if defined(AK_FA_TMA_ON) && AK_FA_TMA_ON
  const int slot = fa_tma_slot_of(q, k, v, batch, heads, seq, head_dim);
  if (slot >= 0) {
    const unsigned sbase = (smem_u32(smem) + 1023u) & ~1023u;
    if (d <= 64)
      attend_tma<64>(ak_tensor_maps[slot], O, seq, d, q0, (int)bh, sbase);
    else
      attend_tma<128>(ak_tensor_maps[slot], O, seq, d, q0, (int)bh, sbase);
    return;
  }
  if (threadIdx.x >= AK_THREADS) return;  // the producer warpgroup
  attend_without_maps(Q, K, V, O, seq, d, q0, smem_u32(smem));
#else
#if AK_BLOCK_THREADS != AK_THREADS
  if (threadIdx.x >= AK_THREADS) return;                     // the producer warpgroup: nothing to do on these paths
#endif
#if defined(AK_FA_WGMMA_ON) && AK_FA_WGMMA_ON
  const unsigned sbase = (smem_u32(smem) + 1023u) & ~1023u;  // the swizzle period; the geometry grants 1 KiB
  if (d <= 64)
    attend_wgmma<64>(Q, K, V, O, seq, d, q0, sbase);
  else
    attend_wgmma<128>(Q, K, V, O, seq, d, q0, sbase);
#else
  const unsigned sbase = smem_u32(smem);
  if (d <= 64)
    attend<64>(Q, K, V, O, seq, d, q0, sbase);
  else
    attend<128>(Q, K, V, O, seq, d, q0, sbase);
#endif
#endif  // AK_FA_TMA_ON
}
