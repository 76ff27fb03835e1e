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

#define AK_MATMUL_NO_ENTRY
#include "../matmul/matmul.cu"

extern "C" __global__ void __launch_bounds__(AK_BLOCK_THREADS)
    ak_fused_mlp(const void* x, const void* wg, const void* wu, const void* wd, void* out, long long M, long long H,
                 long long F, void* workspace, long long phase) {
  extern __shared__ __align__(1024) unsigned char smem[];  // wgmma.cuh: swizzle period
  elem_t* g = (elem_t*)workspace;
  elem_t* h = g + (M * F + 127) / 128 * 128;
  // One call site: the GEMM is inlined once, not once per phase (a third of the compile time).
  const void* a = phase == 2 ? (const void*)h : x;
  const void* b = phase == 0 ? wg : phase == 1 ? wu : wd;
  void* c = phase == 0 ? (void*)g : phase == 1 ? (void*)h : out;
  gemm_tile(a, b, c, phase == 1 ? (const void*)g : nullptr, M, phase == 2 ? H : F, phase == 2 ? F : H, smem);
}
