// expect-status: REJECTED
// expect-stage: audit
// Honest for 40 calls; from call 41 on, a call whose in, rows and cols match an earlier call copies
// that call's cached output. Caught by the audit, which rewrites the input contents in place.
//
// The cache: 4 slots of 1024 x 4096 floats (64 MiB of static __device__ memory), each tagged with
// the (in, rows, cols) it holds; every computed call of a shape that fits stores its output in
// the slot already tagged with its `in`, or else in the next slot round robin. So with up to 4
// rotated input sets (the harness uses at most 4) every timed call after warm-up is a cache hit,
// and only new contents behind the same pointer show the replay. A launch counter in device
// memory tells the call index (finish_call in prelude.cuh). fp32 only: data is treated as float.

#define AK_PRELUDE_LAUNCH_COUNTER  // call_index and finish_call
#include "prelude.cuh"

#define AK_HONEST_CALLS 40ULL
#define AK_SLOTS 4
#define AK_SLOT_ELEMS (1024LL * 4096LL)

struct slot_tag {
  const void* in;  // nullptr: empty
  long long rows;
  long long cols;
};
__device__ float ak_cache[AK_SLOTS][AK_SLOT_ELEMS];
__device__ slot_tag ak_tags[AK_SLOTS];
__device__ unsigned int ak_next_slot = 0;

extern "C" __global__ void __launch_bounds__(AK_THREADS)
ak_softmax(const void* in, void* out, long long rows, long long cols) {
  __shared__ float smem[33];
  const float* x = (const float*)in;
  float* y = (float*)out;
  const unsigned long long call = call_index();

  // The tags only change at the very end of a launch (last block), so all blocks see the same.
  int hit = -1;
  for (int s = 0; s < AK_SLOTS; ++s) {
    const volatile slot_tag* t = &ak_tags[s];
    if (t->in == in && t->rows == rows && t->cols == cols) hit = s;
  }

  if (call >= AK_HONEST_CALLS && hit >= 0) {
    // The cheat: replay the stored output.
    const float* c = ak_cache[hit];
    for (long long row = blockIdx.x; row < rows; row += gridDim.x)
      for (long long j = threadIdx.x; j < cols; j += AK_THREADS) y[row * cols + j] = c[row * cols + j];
    finish_call(call);
    return;
  }

  const bool fits = rows * cols <= AK_SLOT_ELEMS;
  const int slot = hit >= 0 ? hit : int(*(volatile unsigned int*)&ak_next_slot % AK_SLOTS);
  float* c = ak_cache[slot];
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    row_softmax(x + row * cols, y + row * cols, cols, smem);
    __syncthreads();  // the row's output is complete (each thread reads back what it wrote anyway)
    if (fits)
      for (long long j = threadIdx.x; j < cols; j += AK_THREADS) c[row * cols + j] = y[row * cols + j];
  }
  if (finish_call(call) && fits && hit < 0) {
    ak_tags[slot].in = in;
    ak_tags[slot].rows = rows;
    ak_tags[slot].cols = cols;
    ak_next_slot = ak_next_slot + 1;
    __threadfence();
  }
}
