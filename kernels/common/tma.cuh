// The Tensor Memory Accelerator and the shared-memory barriers that pace it (sm_90): the PTX that
// matmul's and flash_attention's TMA paths share (kernels/matmul/wgmma_tma.cuh,
// kernels/flash_attention/wgmma_tma.cuh). Inlined once into each embedded source
// (kernels/embed.cmake).
#ifndef AK_COMMON_TMA_CUH
#define AK_COMMON_TMA_CUH

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Returns once the phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
  asm volatile(
      "{\n.reg .pred done;\nAK_MBAR_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra AK_MBAR_WAIT;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
// The box at (c0 innermost, c1) of `map` into shared memory at dst, completing bytes on bar.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const void* map, int c0, int c1, unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          dst),
      "l"(map), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

// The box at (c0 innermost, c1, c2) of a 3-D `map` into shared memory at dst, completing bytes on bar.
__device__ __forceinline__ void tma_load_3d(unsigned dst, const void* map, int c0, int c1, int c2, unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::
          "r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}

// A map written by a host copy before the launch, made visible to the tensormap proxy that the
// copies read it through.
__device__ __forceinline__ void tma_map_acquire(const void* map) {
  asm volatile("fence.proxy.tensormap::generic.acquire.sys [%0], 128;\n" ::"l"(map) : "memory");
}

// kernels/registry.h's tensor-map slots: the first of `count` slots whose key (8 u64: the maps'
// tensors' addresses, then the call's dims, zero-padded as the sandbox writes it) equals `key`, or
// -1. Warp 0 alone calls it (lane i reads slot i, every lane gets the answer).
template <class Slot>
__device__ __forceinline__ int tma_slot_index(const Slot* slots, int count, const unsigned long long (&key)[8]) {
  const int lane = (int)threadIdx.x & 31;
  bool hit = lane < count;
  if (hit) {
#pragma unroll
    for (int i = 0; i < 8; ++i) hit = hit && slots[lane].key[i] == key[i];
  }
  const unsigned found = __ballot_sync(0xffffffffu, hit);
  return found ? __ffs(found) - 1 : -1;
}

#endif  // AK_COMMON_TMA_CUH
