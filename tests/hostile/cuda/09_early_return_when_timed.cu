// expect-status: REJECTED
// expect-stage: audit
// Honest for its first 40 calls (all of verification); from call 41 on it returns at once and
// writes nothing. Caught by the audit call, whose output (NaN-poisoned before it) is verified.
//
// A launch counter in device memory tells the call index (finish_call in prelude.cuh). fp32 only:
// data is treated as float whatever AK_DTYPE says.

#define AK_PRELUDE_LAUNCH_COUNTER  // call_index and finish_call
#include "prelude.cuh"

#define AK_HONEST_CALLS 40ULL

extern "C" __global__ void __launch_bounds__(AK_THREADS)
ak_softmax(const void* in, void* out, long long rows, long long cols) {
  __shared__ float smem[33];
  const unsigned long long call = call_index();
  if (call >= AK_HONEST_CALLS) return;  // the cheat: no work, no counting any more
  const float* x = (const float*)in;
  float* y = (float*)out;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x)
    row_softmax(x + row * cols, y + row * cols, cols, smem);
  finish_call(call);
}
