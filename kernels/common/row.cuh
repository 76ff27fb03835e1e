// Device helpers of the row-wise CUDA sources that normalise a row (rmsnorm, layernorm, ...):
// a pack of AK_VEC elements (at most 16 bytes), warp and block sums, and the thread group that
// owns a row. Needs elem.cuh before it and AK_THREADS, AK_VEC, AK_WARP_PER_ROW defined. Inlined
// by kernels/embed.cmake like elem.cuh.
#if AK_THREADS % 32 != 0 || AK_THREADS < 32 || AK_THREADS > 1024
#error "AK_THREADS must be a multiple of 32 in [32, 1024]"
#endif
#if AK_VEC != 1 && AK_VEC != 2 && AK_VEC != 4 && AK_VEC != 8
#error "AK_VEC must be 1, 2, 4 or 8"
#endif

// fp32 with 8 elements would be 32 bytes: loads stay at most 16 bytes wide.
#define AK_PACK (AK_VEC * sizeof(elem_t) > 16 ? 16 / sizeof(elem_t) : AK_VEC)
struct __align__(sizeof(elem_t) * AK_PACK) pack_t {
  elem_t v[AK_PACK];
};

__device__ __forceinline__ bool pack_aligned(const void* p) {
  return ((unsigned long long)p) % sizeof(pack_t) == 0;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// The threads that own one row: a whole block (AK_WARP_PER_ROW=0) or one warp (=1). Rows are
// visited with a grid-stride loop: first_row(), then += row_stride().
struct RowGroup {
#if AK_WARP_PER_ROW
  static constexpr int kThreads = 32;
  __device__ int t() const { return threadIdx.x & 31; }
  __device__ long long first_row() const { return (long long)blockIdx.x * (AK_THREADS / 32) + (threadIdx.x >> 5); }
  __device__ long long row_stride() const { return (long long)gridDim.x * (AK_THREADS / 32); }
  // The sum over the group, in every thread of it.
  __device__ float sum(float v, float*) const { return warp_sum(v); }
#else
  static constexpr int kThreads = AK_THREADS;
  __device__ int t() const { return threadIdx.x; }
  __device__ long long first_row() const { return blockIdx.x; }
  __device__ long long row_stride() const { return gridDim.x; }
  // smem: 33 floats of shared memory, reused call after call.
  __device__ float sum(float v, float* smem) const {
    v = warp_sum(v);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    __syncthreads();  // the previous call's result may still be read
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    if (warp == 0) {
      float w = lane < AK_THREADS / 32 ? smem[lane] : 0.0f;
      w = warp_sum(w);
      if (lane == 0) smem[32] = w;
    }
    __syncthreads();
    return smem[32];
  }
#endif
};
