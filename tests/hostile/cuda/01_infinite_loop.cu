// expect-status: TIMEOUT
// expect-stage: verify|sandbox
// Never returns: every thread spins on a volatile __device__ flag that nothing ever sets. Caught
// by the supervisor's wall-clock limit on the sandbox, which kills the process.
//
// Stage: the supervisor reports the stage of the sandbox's last progress line (verify.smoke), or
// "sandbox" when there was none (worker/supervisor.h); both are accepted.
//
// The flag is volatile, so each iteration is a real load the compiler must keep: it cannot prove
// the loop infinite and delete it (an empty side-effect-free loop may be assumed to terminate).
// fp32 only as far as it matters: the data is never touched.

#ifndef AK_THREADS
#define AK_THREADS 256
#endif

__device__ volatile int ak_release = 0;  // never written: the loop waits for it forever

extern "C" __global__ void __launch_bounds__(AK_THREADS)
ak_softmax(const void* in, void* out, long long rows, long long cols) {
  while (ak_release == 0) {
  }
  // Unreachable; it gives the loop an exit the compiler has to respect.
  if (threadIdx.x == 0 && blockIdx.x == 0 && rows > 0 && cols > 0) ((float*)out)[0] = ((const float*)in)[0];
}
