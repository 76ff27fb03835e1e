// Device helpers of the row-wise CUDA sources (softmax, rmsnorm, layernorm, ...): a pack of
// AK_VEC elements (at most 16 bytes), warp and block sums, the thread group that owns a row, and
// a register cache of a row's packs (AK_CACHE). Needs elem.cuh before it and AK_THREADS, AK_VEC,
// AK_WARP_PER_ROW defined (AK_CACHE defaults to 0). Inlined by kernels/embed.cmake like elem.cuh.
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

// A row of x split for vector loads: a scalar head up to the first pack boundary (so that x need
// not be aligned), whole packs from there, and a scalar tail from tail_start.
struct RowSplit {
  long long head;
  long long npacks;
  long long tail_start;
  const pack_t* xp;
};
__device__ __forceinline__ RowSplit row_split(const elem_t* x, long long cols) {
  RowSplit r;
  r.head = (long long)((sizeof(pack_t) - (unsigned long long)x % sizeof(pack_t)) % sizeof(pack_t) / sizeof(elem_t));
  if (r.head > cols) r.head = cols;
  r.npacks = (cols - r.head) / AK_PACK;
  r.tail_start = r.head + r.npacks * AK_PACK;
  r.xp = (const pack_t*)(x + r.head);
  return r;
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

// The register cache: packs t, t + n, ..., t + (AK_CACHE - 1) n of a row (t a thread's index in
// its group of n), loaded at once, every load in flight before the first is used, so that a row of
// at most AK_CACHE packs per thread is read from memory once however many sweeps the kernel makes
// over it. Each pack is kept as 32-bit words (a 16-bit pack of one element takes a word alone),
// so 16-bit elements stay two to a register; elements are converted where they are used, and
// fence() makes the words opaque to the compiler between sweeps, which would otherwise keep every
// converted value alive from one sweep to the next (two registers per 16-bit element) and spill.
#ifndef AK_CACHE
#define AK_CACHE 0
#endif
#if AK_CACHE < 0 || AK_CACHE > 16
#error "AK_CACHE must be in [0, 16]"
#endif
#if AK_CACHE > 0
#define AK_WORDS ((sizeof(pack_t) + 3) / 4)
struct RowCache {
  unsigned w[AK_CACHE][AK_WORDS];
  // Whether a row of npacks packs fits a group of n threads.
  __device__ __forceinline__ static bool fits(long long npacks, int n) { return npacks <= (long long)AK_CACHE * n; }
  // Loads the thread's packs of xp; a pack past npacks holds `fill` in every element (fill's bits
  // in the dtype, repeated in both halves of a word for 16-bit elements).
  __device__ __forceinline__ void load(const pack_t* xp, int t, int n, long long npacks, unsigned fill) {
#pragma unroll
    for (int j = 0; j < AK_CACHE; ++j) {
      const long long i = t + (long long)j * n;
      const bool in = i < npacks;
      if (sizeof(pack_t) == 16) {
        const uint4 v = in ? *(const uint4*)(xp + i) : make_uint4(fill, fill, fill, fill);
        w[j][0] = v.x;
        w[j][1 % AK_WORDS] = v.y;
        w[j][2 % AK_WORDS] = v.z;
        w[j][3 % AK_WORDS] = v.w;
      } else if (sizeof(pack_t) == 8) {
        const uint2 v = in ? *(const uint2*)(xp + i) : make_uint2(fill, fill);
        w[j][0] = v.x;
        w[j][1 % AK_WORDS] = v.y;
      } else if (sizeof(pack_t) == 4) {
        w[j][0] = in ? *(const unsigned*)(xp + i) : fill;
      } else {
        w[j][0] = in ? *(const unsigned short*)(xp + i) : (fill & 0xffffu);
      }
    }
  }
  // Element k of cached pack j, in fp32.
  __device__ __forceinline__ float get(int j, int k) const {
#if AK_DTYPE == 0
    return __uint_as_float(w[j][k]);
#else
    return to_f32((elem_t)(w[j][k / 2] >> (16 * (k % 2))));
#endif
  }
  __device__ __forceinline__ void fence() {
#pragma unroll
    for (int j = 0; j < AK_CACHE; ++j)
#pragma unroll
      for (int q = 0; q < (int)AK_WORDS; ++q) asm volatile("" : "+r"(w[j][q]));
  }
};
// With a register cache, one block per SM may take every register: ptxas otherwise aims at two
// blocks of 1024 threads and spills the cache. (__launch_bounds__(AK_THREADS, AK_MIN_BLOCKS))
#define AK_MIN_BLOCKS 1
#else
#define AK_MIN_BLOCKS 0
#endif
