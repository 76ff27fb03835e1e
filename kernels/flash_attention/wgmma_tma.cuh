// The Hopper paths fed by TMA (fp16/bf16, sm_90a, AK_WGMMA=3 and 4): wgmma.cuh's products, online softmax
// and overlap (AK_WGMMA=2's order: step j issues S_j = Q K_j^T, then P_{j-1} V_{j-1}, and runs S_j's
// softmax while the second product is on the tensor cores), with Q, K and V brought in by the
// Tensor Memory Accelerator from a producer warpgroup and paced by mbarriers instead of cp.async
// and block barriers. No computing thread issues a copy or waits at a block barrier, so each
// warpgroup runs at its own pace and one's softmax overlaps another's products. Included by
// flash_attention.cu after wgmma.cuh; compiled only where AK_FA_TMA_ON is 1.
//
// Roles. The block is AK_THREADS computing threads (AK_WARPS / 4 warpgroups of 64 query rows, as
// wgmma.cuh) and one producer warpgroup after them (threadIdx.x >= AK_THREADS), of which one thread
// issues every copy; at 384 threads the producer gives its registers to the computing warpgroups
// (setmaxnreg: 24 and 240, 24 * 128 + 240 * 256 = 168 * 384, what the launch bound gives).
//
// Tensor maps (the sandbox builds them, spec.cc's cuda_tensor_maps, kernels/registry.h): q, k and
// v each as a 3-D tensor of dims {head_dim, seq, batch * heads} (innermost first), in boxes of
// 64 x rows x 1 (rows: AK_BLOCK_M for q, AK_BLOCK_N for k and v) with the 128-byte swizzle, so that
// one box is one 64-column block of wgmma.cuh's tile layout. Columns past head_dim and rows past
// seq arrive as zeros: a head's last tile never reads the next head's rows (whose NaN would reach
// this head's output through 0 * NaN). A slot holds the three maps, then the key: q's, k's and v's
// addresses, batch, heads, seq, head_dim, 0. A block whose call has no slot (maps left out: TMA's
// rules broken, no driver support) takes the mma.sync path, out of line, with the computing threads alone
// (flash_attention.cu, attend_without_maps).
//
// AK_WGMMA=4 (two computing warpgroups): the same, with the warpgroups taking turns to issue their
// products (named barriers 2 and 3, as FlashAttention-3 schedules them), so that one warpgroup's
// softmax runs while the other's products are on the tensor cores.
//
// Pipeline. Barriers: q_full (one phase, the block's Q tile); for each of the two K buffers
// k_full[s] and k_empty[s], likewise for V. full: the producer's arrive with the byte count,
// completed by the copies. empty: one arrive from each computing warp once its warpgroup's wgmma
// that read the buffer are done. Tile j uses buffer j % 2 in round j / 2, whose parity the waits
// name; the producer's first round waits on the parity before each barrier's first phase, which
// passes at once. Copies in the order Q, K0, V0, K1, V1, ...: step j needs K_j and V_{j-1}, and the
// producer refills K_j's buffer once every warp is done with K_{j-2} (its S product, step j - 2)
// and V_j's once every warp is done with V_{j-2} (its P V product, step j - 1).
// Causal: a warpgroup with no work on a tile (all its keys follow the warpgroup's last query, or
// its rows lie past seq) still waits for the tile's buffers to be full before it arrives on their
// empty barriers, so that no warp arrives twice in one phase.

#if AK_FA_WGMMA_ON && (AK_WGMMA == 3 || AK_WGMMA == 4)
#define AK_FA_TMA_ON 1
#define AK_FA_TURNS (AK_WGMMA == 4)
#include "../common/tma.cuh"

#define AK_FA_TMA_SLOTS 16  // kernels/registry.h, kTensorMapSlots

#if AK_THREADS == 256
#define AK_FA_TMA_REGS 1  // 384 threads: the exchange in the header
#else
#define AK_FA_TMA_REGS 0  // 256 threads: every thread may have the most there is
#endif

// kernels/registry.h's slot for three maps: the maps, then the key.
struct __align__(64) fa_tma_slot {
  unsigned long long map[3][16];  // CUtensorMap of q, k, v
  unsigned long long key[8];      // q's, k's, v's addresses, batch, heads, seq, head_dim, 0
};
extern "C" {
__device__ fa_tma_slot ak_tensor_maps[AK_FA_TMA_SLOTS];
}

// The slot holding this call's maps, or -1, one answer for the whole block (warp 0 reads the
// keys; every thread of the block must call it).
__device__ __forceinline__ int fa_tma_slot_of(const void* q, const void* k, const void* v, long long batch,
                                              long long heads, long long seq, long long head_dim) {
  __shared__ int slot;
  if (threadIdx.x < 32) {
    const unsigned long long key[8] = {
        (unsigned long long)q,     (unsigned long long)k,   (unsigned long long)v,        (unsigned long long)batch,
        (unsigned long long)heads, (unsigned long long)seq, (unsigned long long)head_dim, 0};
    const int found = tma_slot_index(ak_tensor_maps, AK_FA_TMA_SLOTS, key);
    if (threadIdx.x == 0) slot = found;
  }
  __syncthreads();
  return slot;
}

#if AK_FA_TURNS
// Named barrier 2 + w of the 256 computing threads (AK_WGMMA=4): warpgroup w's turn to issue its
// products (1 is fa_sync's). Wait for it, or arrive without waiting.
__device__ __forceinline__ void fa_turn_sync(int w) {
  if (w == 0)
    asm volatile("bar.sync 2, 256;\n" ::: "memory");
  else
    asm volatile("bar.sync 3, 256;\n" ::: "memory");
}
// The barrier id from a register: no branch, since it runs while products are in flight.
__device__ __forceinline__ void fa_turn_arrive(int w) { asm volatile("bar.arrive %0, 256;\n" ::"r"(2 + w) : "memory"); }
#endif

// The block's query tile (rows q0 ..) of head bh (the maps' third coordinate), read through the
// maps of `slot`; O: the head's output. Every thread of the block calls it; sbase is 1024-byte
// aligned.
template <int P>
__device__ __forceinline__ void attend_tma(const fa_tma_slot& slot, elem_t* __restrict__ O, long long seq, int d,
                                           long long q0, int bh, unsigned sbase) {
  constexpr unsigned kQBlock = AK_BLOCK_M * 128;  // one 64-column block of the Q tile
  constexpr unsigned kKVBlock = AK_BLOCK_N * 128;
  constexpr unsigned kKVBytes = (P / 64) * kKVBlock;  // one K or V buffer
  // q_full, then k_full[2], k_empty[2], v_full[2], v_empty[2]
  __shared__ __align__(8) unsigned long long bars[9];
  const unsigned q_full = smem_u32(bars);
  const unsigned k_full = q_full + 8, k_empty = q_full + 24, v_full = q_full + 40, v_empty = q_full + 56;
  const unsigned sq = sbase;
  const unsigned sk = sq + (P / 64) * kQBlock;
  const unsigned sv = sk + 2 * kKVBytes;
  const int tid = (int)threadIdx.x;
  const long long kv_end = AK_CAUSAL && q0 + AK_BLOCK_M < seq ? q0 + AK_BLOCK_M : seq;
  const int kv_tiles = (int)((kv_end + AK_BLOCK_N - 1) / AK_BLOCK_N);
  if (tid == 0) {
    mbar_init(q_full, 1);
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      mbar_init(k_full + 8 * s, 1);
      mbar_init(k_empty + 8 * s, AK_WARPS);  // every computing warp
      mbar_init(v_full + 8 * s, 1);
      mbar_init(v_empty + 8 * s, AK_WARPS);
    }
    // The barriers' initialisation is visible to the other threads and to the async proxy.
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (tid >= AK_THREADS) {  // the producer warpgroup
#if AK_FA_TMA_REGS
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
#endif
    if (tid == AK_THREADS) {
      const void* map_q = slot.map[0];
      const void* map_k = slot.map[1];
      const void* map_v = slot.map[2];
      tma_map_acquire(map_q);
      tma_map_acquire(map_k);
      tma_map_acquire(map_v);
      mbar_arrive_expect_tx(q_full, (P / 64) * kQBlock);
#pragma unroll
      for (int b = 0; b < P / 64; ++b) tma_load_3d(sq + b * kQBlock, map_q, 64 * b, (int)q0, bh, q_full);
      for (int j = 0; j < kv_tiles; ++j) {
        const unsigned s = (unsigned)j & 1u;
        const unsigned parity = (((unsigned)j >> 1) & 1u) ^ 1u;  // the buffer's previous round is consumed
        const int row = j * AK_BLOCK_N;
        mbar_wait(k_empty + 8 * s, parity);
        mbar_arrive_expect_tx(k_full + 8 * s, kKVBytes);
#pragma unroll
        for (int b = 0; b < P / 64; ++b)
          tma_load_3d(sk + s * kKVBytes + b * kKVBlock, map_k, 64 * b, row, bh, k_full + 8 * s);
        mbar_wait(v_empty + 8 * s, parity);
        mbar_arrive_expect_tx(v_full + 8 * s, kKVBytes);
#pragma unroll
        for (int b = 0; b < P / 64; ++b)
          tma_load_3d(sv + s * kKVBytes + b * kKVBlock, map_v, 64 * b, row, bh, v_full + 8 * s);
      }
    }
    return;
  }

#if AK_FA_TMA_REGS
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
#endif
  const int lane = tid & 31;
  const bool signals = lane == 0;                         // the warp's arrive on an empty barrier
  const int wr0 = (tid >> 5) * 16;                        // the warp's first row in the tile
  const int wg_row0 = (tid >> 7) * 64;                    // the warpgroup's
  const float c = 1.4426950408889634f / sqrtf((float)d);  // log2(e) / sqrt(d)
  const int wg_tiles = fa_wg_tiles(q0, wg_row0, kv_end, seq);

  float o[AK_ROWS][AK_OUTS(P)];
  float mc[AK_ROWS];  // running max of each row times c (-inf: none yet)
  float l[AK_ROWS];   // this thread's part of each row's sum of exponentials
  float alpha[AK_ROWS];
  start_rows<P>(o, mc, l);
  const unsigned q_rows = sq + (unsigned)wg_row0 * 128;
  float s[AK_ROWS][AK_SCORES];
  // P's fragments alternate between pa and pb, as in wgmma.cuh's AK_WGMMA=2 path.
  unsigned pa[AK_BLOCK_N / 16][4];
  unsigned pb[AK_BLOCK_N / 16][4];

#if AK_FA_TURNS
  // The two warpgroups take turns to issue their products, so that one's softmax runs while the
  // other's products are on the tensor cores: warpgroup w issues in its turn (fa_turn_sync(w)) and
  // then passes the turn on (fa_turn_arrive(w ^ 1)). Each takes kv_tiles + 1 turns (the prologue's
  // and one a step, with or without work, so that the counts match for causal tiles), warpgroup 0
  // first: warpgroup 1 passes it one turn before its own first, and warpgroup 0 takes up the pass
  // after warpgroup 1's last once its loop is done, so that no arrive is left pending at the end.
  const int wg = tid >> 7;
  if (wg == 1) fa_turn_arrive(0);
  auto turn_begin = [&] { fa_turn_sync(wg); };
  // Unconditional (no branch while products are in flight: see the K arrive below); warpgroup 0
  // takes up warpgroup 1's last pass after its loop.
  auto turn_end = [&] { fa_turn_arrive(wg ^ 1); };
#else
  auto turn_begin = [] {};
  auto turn_end = [] {};
#endif

  mbar_wait(q_full, 0);
  mbar_wait(k_full, 0);  // K_0 (kv_tiles >= 1: seq >= 1)
  // Between a product's issue and its wait no branch may separate the two (a branch while wgmma
  // are in flight has ptxas serialise every wgmma of the kernel: its C7518, "WG.DP in divergent
  // path"), so each branch below has its own issue, pass of the turn and wait.
  turn_begin();
  if (0 < wg_tiles) {
    fa_issue_scores<P>(s, q_rows, sk);
    turn_end();
    wgmma_wait<0>();
    fa_hold(s);
    tile_softmax(s, mc, l, alpha, 0, seq, q0, wr0, c, lane);
    fa_pack(pa, s);
  } else {
    turn_end();
  }
  if (signals) mbar_arrive(k_empty);
  auto step = [&](int j, unsigned(&p_prev)[AK_BLOCK_N / 16][4], unsigned(&p_next)[AK_BLOCK_N / 16][4]) {
    const unsigned ks = (unsigned)j & 1u, vs = (unsigned)(j - 1) & 1u;
    const bool has_k = j < kv_tiles;
    if (has_k) mbar_wait(k_full + 8 * ks, ((unsigned)j >> 1) & 1u);  // K_j has landed
    mbar_wait(v_full + 8 * vs, ((unsigned)(j - 1) >> 1) & 1u);       // V_{j-1} has landed
    const unsigned stage = ks * kKVBytes;
    const unsigned prev = vs * kKVBytes;
    turn_begin();
    if (j < wg_tiles) {  // S_j, then P_{j-1} V_{j-1}
      fa_issue_scores<P>(s, q_rows, sk + stage);
      fa_issue_pv<P>(o, p_prev, sv + prev);
      turn_end();
      wgmma_wait<1>();  // S_j is done (groups complete in order)
      fa_hold(s);
      tile_softmax(s, mc, l, alpha, (long long)j * AK_BLOCK_N, seq, q0, wr0, c, lane);
      fa_pack(p_next, s);
      wgmma_wait<0>();  // ... and P_{j-1} V_{j-1}
      fa_hold(o);
      fa_hold_p(p_prev);
      // K_j's buffer may be refilled. Not before: a branch (the arrive is lane 0's) while the P V
      // product, which reads P from registers, is in flight has ptxas serialise every wgmma of the
      // kernel (its C7518, "WG.DP in divergent path").
      if (signals) mbar_arrive(k_empty + 8 * ks);
      rescale<P>(o, alpha);
    } else if (j == wg_tiles) {  // the warpgroup's last tile: P V alone
      fa_issue_pv<P>(o, p_prev, sv + prev);
      turn_end();
      wgmma_wait<0>();
      fa_hold(o);
      fa_hold_p(p_prev);
      if (has_k && signals) mbar_arrive(k_empty + 8 * ks);  // K_j unread here, but full: no early arrive
    } else {
      turn_end();
      if (has_k && signals) mbar_arrive(k_empty + 8 * ks);
    }
    if (signals) mbar_arrive(v_empty + 8 * vs);
  };
  for (int j = 1; j <= kv_tiles; j += 2) {
    step(j, pa, pb);
    if (j + 1 <= kv_tiles) step(j + 1, pb, pa);
  }
#if AK_FA_TURNS
  if (wg == 0) fa_turn_sync(0);  // warpgroup 1's pass after its last turn: no arrive left pending
#endif
  store_rows<P>(O, o, l, q0 + wr0, seq, d, lane);
}
#else
#define AK_FA_TMA_ON 0
#endif  // AK_FA_WGMMA_ON && (AK_WGMMA == 3 || AK_WGMMA == 4)
