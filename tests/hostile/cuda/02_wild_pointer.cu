// expect-status: CRASH
// expect-stage: verify
// Every block stores through a wild pointer 2^40 floats (4 TiB) past `out`, unmapped memory: the
// launch faults with cudaErrorIllegalAddress, which poisons the context; the sandbox dies on it.
//
// The address is derived from `out`, not a constant, so the compiler keeps the store. fp32 only:
// the data is read and written as float whatever AK_DTYPE says.

#ifndef AK_THREADS
#define AK_THREADS 256
#endif

extern "C" __global__ void __launch_bounds__(AK_THREADS)
ak_softmax(const void* in, void* out, long long rows, long long cols) {
  float* wild = (float*)out + (1LL << 40) + (long long)blockIdx.x * AK_THREADS;
  if (rows > 0 && cols > 0) wild[threadIdx.x] = ((const float*)in)[0];
}
