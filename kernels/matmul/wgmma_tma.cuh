// The Hopper path fed by TMA (fp16/bf16, sm_90a, AK_WGMMA=2 and 3): wgmma.cuh's warpgroup MMA and
// shared-memory layout, with the tiles brought in by the Tensor Memory Accelerator from a producer
// warpgroup. Included by matmul.cu after wgmma.cuh; compiled only where AK_TMA_ON is 1.
//
// Roles. The block is AK_THREADS computing threads (wgmma.cuh's warpgroups) and one producer
// warpgroup after them (threadIdx.x >= AK_THREADS), of which one thread issues every copy; the
// producer gives its registers to the computing warpgroups (setmaxnreg).
//
// Tensor maps. The sandbox builds them (kernels/registry.h, TensorMapSpec; the matmul spec's
// cuda_tensor_maps): A [M, K] in boxes of AK_BK (64) x AK_BM, B [K, N] in boxes of 64 x 64, both
// with the 128-byte swizzle, which is wgmma.cuh's layout: a stage's A tile is one box, its B
// tile AK_BN / 64 boxes, one per 64-column block. Out-of-bounds elements arrive as zeros, so
// ragged tiles need no guards. They live in the module's `ak_tensor_maps` slots with a key (A's
// and B's addresses, M, N, K); a block whose call has no slot (maps left out: TMA's rules
// broken, no driver support) takes matmul.cu's other paths.
//
// Pipeline: an mbarrier pair per stage. full[s]: the producer's arrive with the stage's byte
// count, completed by the copies. empty[s]: one arrive from each computing warp that reads the
// stage (every computing warp; with ping-pong, the 4 of the warpgroup whose tile it is) once the wgmma
// reading the stage have finished (wgmma.wait_group 1 after issuing the next stage). Tile kt
// uses stage kt % S in round kt / S, whose parity the waits name; the producer's first round
// waits on the parity before the barrier's first phase, which passes at once. Up to S tiles are
// in flight, and one wgmma group while the next stage's group is issued. The ring and its
// counts run on across a block's tiles (more than one with AK_MAX_BLOCKS).
//
// Ping-pong (AK_WGMMA=3, two computing warpgroups). Each computing warpgroup takes a whole tile:
// warpgroup w the block's tiles j = w, w + 2, ... (tile j is blockIdx.x + j * gridDim.x, the
// order in which the producer fills the ring), with AK_BM / 64 m64 steps and AK_BM / 64 *
// AK_BN / 2 accumulators a thread. Their main loops take turns: warpgroup w starts tile j once
// the other has waited for every stage of tile j - 1 (a named barrier of the 256 computing
// threads, one per direction: the other arrives, this one syncs). So tile j's stages are the
// next ones in the ring when its waits begin, and no wait can name a parity two phases ahead,
// and one warpgroup's stores run while the other's MMA do. A stage is read by one warpgroup:
// its empty barrier counts that warpgroup's 4 warps.
//
// Constraints (on top of wgmma.cuh's; gemm_config_error says them): AK_BK 64, AK_BM <= 256, at
// most 896 computing threads; AK_WGMMA=3: two computing warpgroups.

#if AK_WGMMA_ON && (AK_WGMMA == 2 || AK_WGMMA == 3)
#if AK_BK != 64 || AK_BM > 256
#error "AK_WGMMA=2 or 3 (TMA) needs AK_BK 64 (one 128-byte swizzled row of A per tile row) and AK_BM <= 256 (a TMA box)"
#endif
#define AK_TMA_PINGPONG (AK_WGMMA == 3)
#define AK_TMA_ON 1

#define AK_TMA_SLOTS 16  // kernels/registry.h, kTensorMapSlots
#include "../common/tma.cuh"

// Registers: at 384 threads (two computing warpgroups) the launch bound gives each thread 168;
// the producer warpgroup keeps 40 and the computing ones take 232, which balances the register
// file exactly (168 * 384 = 40 * 128 + 232 * 256). setmaxnreg.inc waits until the registers are
// free, so a block whose sums were not checked on a GPU skips the exchange (AK_TMA_REGS 0); so do
// blocks of 256 threads or fewer, which start with the most a thread can have. ptxas may still drop
// the exchange (its warning C7508, "'setmaxnreg' ignored": seen for ping-pong tiles of 64 columns),
// which costs the computing warpgroups registers, not correctness.
#if AK_BLOCK_THREADS == 384
#define AK_TMA_REGS 1
#else
#define AK_TMA_REGS 0
#endif

// kernels/registry.h's slot for two maps: the maps, then the key.
struct __align__(64) ak_tma_slot {
  unsigned long long map[2][16];  // CUtensorMap of A, then of B
  unsigned long long key[8];      // A's address, B's address, M, N, K, 0, 0, 0
};
extern "C" {
__device__ ak_tma_slot ak_tensor_maps[AK_TMA_SLOTS];
}

// The slot holding this call's maps, or -1, one answer for the whole block (warp 0 reads the
// keys; every thread of the block must call it).
__device__ __forceinline__ int tma_slot(const void* a, const void* b, long long M, long long N, long long K) {
  __shared__ int slot;
  if (threadIdx.x < 32) {
    const unsigned long long key[8] = {(unsigned long long)a,
                                       (unsigned long long)b,
                                       (unsigned long long)M,
                                       (unsigned long long)N,
                                       (unsigned long long)K,
                                       0,
                                       0,
                                       0};
    const int found = tma_slot_index(ak_tensor_maps, AK_TMA_SLOTS, key);
    if (threadIdx.x == 0) slot = found;
  }
  __syncthreads();
  return slot;
}

// Named barrier 2 + w of the 256 computing threads (ping-pong: warpgroup w's turn); immediate ids,
// so that ptxas reserves only the barriers used. Wait for it, or arrive without waiting.
__device__ __forceinline__ void turn_sync(int w) {
  if (w == 0)
    asm volatile("bar.sync 2, 256;\n" ::: "memory");
  else
    asm volatile("bar.sync 3, 256;\n" ::: "memory");
}
__device__ __forceinline__ void turn_arrive(int w) {
  if (w == 0)
    asm volatile("bar.arrive 2, 256;\n" ::: "memory");
  else
    asm volatile("bar.arrive 3, 256;\n" ::: "memory");
}

// The gate/up epilogue (block_gemm_tma<true>): the tile's accumulators hold AK_BN / 2 columns of
// G = A @ Bg (n8 steps j < AK_BN / 16) and the same columns of U = A @ Bu (steps j + AK_BN / 16,
// the same thread's registers: wg_store's layout); C [M, N] at (m0, n0) gets silu(G) * U over
// AK_BN / 2 columns, G and U both unrounded fp32.
__device__ __forceinline__ float silu_mul(float g, float u) { return g / (1.0f + expf(-g)) * u; }
__device__ __forceinline__ void wg_store_gateup(float (&acc)[AK_WG_MI][AK_WG_ACC], elem_t* __restrict__ C, long long M,
                                                long long N, long long m0, long long n0) {
  constexpr int kHalf = AK_BN / 16;  // n8 steps of one half
  const int t = threadIdx.x & 3;
  const long long row0 = wg_first_row(m0);
#pragma unroll
  for (int i = 0; i < AK_WG_MI; ++i) {
    const long long row = row0 + i * 64;
#pragma unroll
    for (int j = 0; j < kHalf; ++j) {
      const long long col = n0 + j * 8 + 2 * t;
      const float* gv = &acc[i][4 * j];
      const float* uv = &acc[i][4 * (j + kHalf)];
      store_pair(C, nullptr, M, N, row, col, silu_mul(gv[0], uv[0]), silu_mul(gv[1], uv[1]));
      store_pair(C, nullptr, M, N, row + 8, col, silu_mul(gv[2], uv[2]), silu_mul(gv[3], uv[3]));
    }
  }
}

// This block's tiles of C = A @ B (gated when gate is not null), A and B read through the maps of
// `slot`. Every thread of the block calls it. The ring runs on across the block's tiles: the
// producer fetches the next tile's stages while the computing warpgroups store the last one.
// kGateUp (kernels/fused_mlp, AK_GATEUP=1; AK_BN 128 or 256): C [M, N] = silu(A @ Bg) * (A @ Bu)
// in one pass, Bg read through `slot`'s B map and Bu through `up`'s (A's is `slot`'s). A tile
// covers AK_BN / 2 columns of C: its B stage holds those columns of Bg in its first AK_BN / 128
// 64-column blocks and of Bu in the rest, so one wgmma per k16 step computes both products; the
// tiles are those of a [M, 2 N] output.
template <bool kGateUp>
__device__ __forceinline__ void block_gemm_tma(const ak_tma_slot& slot, const ak_tma_slot* up, elem_t* __restrict__ C,
                                               const elem_t* gate, long long M, long long N, long long K,
                                               unsigned sbase) {
  static_assert(!kGateUp || AK_BN >= 128, "the gate/up GEMM needs AK_BN 128 or 256 (a 64-column block a half)");
  constexpr int kTileCols = kGateUp ? AK_BN / 2 : AK_BN;           // columns of C a tile covers
  __shared__ __align__(8) unsigned long long bars[2 * AK_STAGES];  // full[0..S), then empty[0..S)
  const int tid = threadIdx.x;
  const unsigned full0 = smem_u32(bars);
  const unsigned empty0 = full0 + AK_STAGES * 8;
  const unsigned sa0 = sbase;
  const unsigned sb0 = sbase + AK_STAGES * AK_A_STAGE_BYTES;
  const int ktiles = (int)((K + AK_BK - 1) / AK_BK);
  const long long NT = kGateUp ? 2 * N : N;  // the tile grid's columns
  const long long tiles = tile_count(M, NT);
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < AK_STAGES; ++s) {
      mbar_init(full0 + 8 * s, 1);
      mbar_init(empty0 + 8 * s, AK_TMA_PINGPONG ? 4 : AK_THREADS / 32);  // the warps that read a stage
    }
    // The barriers' initialisation is visible to the other threads and to the async proxy.
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (tid >= AK_THREADS) {  // the producer warpgroup
#if AK_TMA_REGS
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
#endif
    if (tid == AK_THREADS) {
      const void* map_a = slot.map[0];
      const void* map_b = slot.map[1];
      const void* map_u = kGateUp ? up->map[1] : map_b;
      tma_map_acquire(map_a);
      tma_map_acquire(map_b);
      if (kGateUp) tma_map_acquire(map_u);
      unsigned it = 0;  // k-tiles issued so far, over all of the block's tiles
      for (long long pid = blockIdx.x; pid < tiles; pid += gridDim.x) {
        long long tile_m, tile_n;
        block_tile(pid, M, NT, tile_m, tile_n);
        const int m0 = (int)(tile_m * AK_BM), n0 = (int)(tile_n * kTileCols);
        for (int kt = 0; kt < ktiles; ++kt, ++it) {
          const unsigned s = it % AK_STAGES;
          mbar_wait(empty0 + 8 * s, ((it / AK_STAGES) & 1u) ^ 1u);  // the stage's previous tile is consumed
          const unsigned full = full0 + 8 * s;
          mbar_arrive_expect_tx(full, AK_A_STAGE_BYTES + AK_B_STAGE_BYTES);
          tma_load_2d(sa0 + s * AK_A_STAGE_BYTES, map_a, kt * AK_BK, m0, full);
#pragma unroll
          for (int j = 0; j < AK_BN / 64; ++j) {
            // kGateUp: blocks [0, AK_BN / 128) from Bg, the rest the same columns of Bu.
            constexpr int kHalfBlocks = AK_BN / 128 > 0 ? AK_BN / 128 : 1;
            const bool upper = kGateUp && j >= kHalfBlocks;
            const int col = n0 + 64 * (kGateUp ? j % kHalfBlocks : j);
            tma_load_2d(sb0 + s * AK_B_STAGE_BYTES + j * AK_WG_B_BLOCK, upper ? map_u : map_b, col, kt * AK_BK, full);
          }
        }
      }
    }
    return;
  }

#if AK_TMA_REGS
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
#endif
  const bool signals = (tid & 31) == 0;
#if AK_TMA_PINGPONG
  // Barrier 2 + w: warpgroup w may start its next tile (bar.sync 1 is block_sync's).
  const int wg = tid >> 7;
  const unsigned a_row0 = 0;
  unsigned it = (unsigned)(wg * ktiles);  // k-tiles issued before this warpgroup's first tile
  for (long long pid = blockIdx.x + (long long)wg * gridDim.x, jt = wg; pid < tiles; pid += 2LL * gridDim.x, jt += 2) {
    if (jt > 0) turn_sync(wg);  // the other warpgroup has waited for the stages of the block's tile jt - 1
#else
  const unsigned a_row0 = (unsigned)((tid >> 7) * (AK_BM / AK_WG_COUNT)) * AK_WG_A_ROW;
  unsigned it = 0;  // k-tiles consumed so far, as the producer counts them
  for (long long pid = blockIdx.x; pid < tiles; pid += gridDim.x) {
#endif
    float acc[AK_WG_MI][AK_WG_ACC];
#pragma unroll
    for (int i = 0; i < AK_WG_MI; ++i)
#pragma unroll
      for (int j = 0; j < AK_WG_ACC; ++j) acc[i][j] = 0.0f;
    for (int kt = 0; kt < ktiles; ++kt, ++it) {
      const unsigned s = it % AK_STAGES;
      mbar_wait(full0 + 8 * s, (it / AK_STAGES) & 1u);  // the stage's copies have landed
      hold(acc);
      wgmma_fence();
      wg_issue(acc, sa0 + s * AK_A_STAGE_BYTES + a_row0, sb0 + s * AK_B_STAGE_BYTES);
      wgmma_commit();
      wgmma_wait<1>();  // the previous k-tile's group is done: its stage may be refilled
      hold(acc);
      if (kt > 0 && signals) mbar_arrive(empty0 + 8 * ((it - 1) % AK_STAGES));
    }
#if AK_TMA_PINGPONG
    if (pid + gridDim.x < tiles) turn_arrive(wg ^ 1);  // tile j + 1's turn
#endif
    wgmma_wait<0>();
    hold(acc);
    if (signals) mbar_arrive(empty0 + 8 * ((it - 1) % AK_STAGES));  // the tile's last stage
    long long tile_m, tile_n;
    block_tile(pid, M, NT, tile_m, tile_n);
    if constexpr (kGateUp)
      wg_store_gateup(acc, C, M, N, tile_m * AK_BM, tile_n * kTileCols);
    else
      wg_store(acc, C, gate, M, N, tile_m * AK_BM, tile_n * AK_BN);
#if AK_TMA_PINGPONG
    it += ktiles;  // the other warpgroup's tile
#endif
  }
}
#else
#define AK_TMA_ON 0
#endif  // AK_WGMMA_ON && (AK_WGMMA == 2 || AK_WGMMA == 3)
