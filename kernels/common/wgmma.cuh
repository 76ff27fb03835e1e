// Hopper's warpgroup MMA: the PTX that matmul's and flash_attention's wgmma paths share (the
// fence, commit and wait of wgmma groups, the generic-to-async proxy fence, and the shared-memory
// matrix descriptor). sm_90a only: included inside those paths' guards (matmul/wgmma.cuh,
// flash_attention/wgmma.cuh), and inlined once into each embedded source (kernels/embed.cmake).
#ifndef AK_COMMON_WGMMA_CUH
#define AK_COMMON_WGMMA_CUH

// Orders this thread's register and shared-memory accesses before the wgmma that follow.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
// Closes the group of wgmma issued since the last commit.
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most kPending groups are in flight.
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// Makes generic-proxy writes to shared memory (st.shared, cp.async) visible to the async proxy that
// wgmma and TMA read through.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// A shared-memory matrix descriptor: the start address, the leading and stride byte offsets (all
// in 16-byte units, as the instruction reads them) and the swizzle mode in bits 62-63 (1: 128-byte,
// 2: 64-byte, 3: 32-byte).
__device__ __forceinline__ unsigned long long wg_desc(unsigned addr, unsigned lbo, unsigned sbo, unsigned mode) {
  return (unsigned long long)((addr & 0x3FFFFu) >> 4) | ((unsigned long long)((lbo >> 4) & 0x3FFFu) << 16) |
         ((unsigned long long)((sbo >> 4) & 0x3FFFu) << 32) | ((unsigned long long)mode << 62);
}

#endif  // AK_COMMON_WGMMA_CUH
