// SwiGLU MLP block, CUDA starter candidate: out = (silu(x @ Wg) * (x @ Wu)) @ Wd (compiled by
// NVRTC: device code only; kernels/embed.cmake inlines the matmul source below, and its include).
//
// Contract:
//   extern "C" __global__ void ak_fused_mlp(const void* x, const void* wg, const void* wu,
//       const void* wd, void* out, long long M, long long H, long long F, void* workspace,
//       long long phase)
//   x [M, H] (tokens, hidden), wg and wu [H, F] (F: the MLP's inner size), wd [F, H], out [M, H],
//   all row-major and contiguous, one dtype (-DAK_DTYPE=0|1|2). Every element of out is written,
//   nothing outside out and the workspace is written, no atomics.
//
// One call is three launches of this kernel on one stream, phase = 0, 1, 2 (the harness appends
// the workspace pointer and the phase to the kernel type's parameters, kernels/registry.h):
//   phase 0: G = x @ Wg                    -> workspace[0 : M*F]         grid: tiles of [M, F]
//   phase 1: Hd = silu(G) * (x @ Wu)       -> workspace[P : P + M*F]     grid: tiles of [M, F]
//   phase 2: out = Hd @ Wd                                               grid: tiles of [M, H]
// with P = M*F rounded up to a multiple of 128 elements (Hd starts 256-byte aligned). The
// workspace holds P + M*F elements of the dtype (the harness allocates them), so G and Hd round
// to it as in PyTorch's eager sequence (x @ Wg, x @ Wu, silu, mul, @ Wd), minus the rounding of
// x @ Wu and silu(G): phase 1 applies the gate to its fp32 accumulators before the one rounding.
// Each phase is the matmul starter's GEMM (kernels/matmul/matmul.cu) with its tunables and
// launch geometry:
//   block = AK_WARPS_M * AK_WARPS_N * 32 threads; grid = ceil(rows / AK_BM) * ceil(cols / AK_BN)
//   blocks for the phase's [rows, cols] output; dynamic shared memory as matmul's.
// The same tunables serve the three GEMMs (K = H for phases 0 and 1, K = F for phase 2).
//
// AK_GATEUP=1 (fp16/bf16, with matmul's TMA paths AK_WGMMA=2 or 3 and AK_BN 128 or 256): where the
// sandbox gave the call the maps of x with Wg and of x with Wu (phases 0's and 1's), phase 1
// computes Hd = silu(x @ Wg) * (x @ Wu) as one GEMM whose tiles hold AK_BN / 2 columns of each
// product (wgmma_tma.cuh, block_gemm_tma<true>), so x is read once for both and G never goes
// through memory; phase 0 then returns at once. Without those maps (another GPU, the torch
// library of models/plug) both phases run as above. Phase 1's grid is that of a [M, 2 F] output.

#ifndef AK_GATEUP
#define AK_GATEUP 0
#endif
#if AK_GATEUP != 0 && AK_GATEUP != 1
#error "AK_GATEUP must be 0 or 1"
#endif

#define AK_MATMUL_NO_ENTRY
#include "../matmul/matmul.cu"

#if AK_GATEUP && (!defined(AK_DTYPE) || AK_DTYPE == 0 || AK_WGMMA < 2 || AK_BN < 128)
#error "AK_GATEUP=1 needs fp16/bf16, matmul's TMA path (AK_WGMMA=2 or 3) and AK_BN 128 or 256"
#endif

#if AK_GATEUP && AK_TMA_ON
// The slots of the maps of (a, b0) and of (a, b1) for a GEMM of M, N, K (-1 where there is none),
// one answer for the whole block, as tma_slot (every thread of the block must call it).
__device__ __forceinline__ int2 tma_slot_pair(const void* a, const void* b0, const void* b1, long long M, long long N,
                                              long long K) {
  __shared__ int2 slots;
  if (threadIdx.x < 32) {
    const unsigned long long g[8] = {(unsigned long long)a,
                                     (unsigned long long)b0,
                                     (unsigned long long)M,
                                     (unsigned long long)N,
                                     (unsigned long long)K,
                                     0,
                                     0,
                                     0};
    const unsigned long long u[8] = {(unsigned long long)a,
                                     (unsigned long long)b1,
                                     (unsigned long long)M,
                                     (unsigned long long)N,
                                     (unsigned long long)K,
                                     0,
                                     0,
                                     0};
    const int found0 = tma_slot_index(ak_tensor_maps, AK_TMA_SLOTS, g);
    const int found1 = tma_slot_index(ak_tensor_maps, AK_TMA_SLOTS, u);
    if (threadIdx.x == 0) slots = make_int2(found0, found1);
  }
  __syncthreads();
  return slots;
}
#endif

extern "C" __global__ void __launch_bounds__(AK_BLOCK_THREADS)
    ak_fused_mlp(const void* x, const void* wg, const void* wu, const void* wd, void* out, long long M, long long H,
                 long long F, void* workspace, long long phase) {
  extern __shared__ __align__(1024) unsigned char smem[];  // wgmma.cuh: swizzle period
  elem_t* g = (elem_t*)workspace;
  elem_t* h = g + (M * F + 127) / 128 * 128;
#if AK_GATEUP && AK_TMA_ON
  if (phase < 2) {
    const int2 slots = tma_slot_pair(x, wg, wu, M, F, H);
    if (slots.x >= 0 && slots.y >= 0 && (smem_u32(smem) & 1023u) == 0) {
      if (phase == 1)
        block_gemm_tma<true>(ak_tensor_maps[slots.x], &ak_tensor_maps[slots.y], h, nullptr, M, F, H, smem_u32(smem));
      return;  // phase 0: phase 1 computes both products
    }
  }
#endif
  // One call site: the GEMM is inlined once, not once per phase (a third of the compile time).
  const void* a = phase == 2 ? (const void*)h : x;
  const void* b = phase == 0 ? wg : phase == 1 ? wu : wd;
  void* c = phase == 0 ? (void*)g : phase == 1 ? (void*)h : out;
  gemm_tile(a, b, c, phase == 1 ? (const void*)g : nullptr, M, phase == 2 ? H : F, phase == 2 ? F : H, smem);
}
