// expect-status: COMPILE_ERROR
// expect-stage: compile
// Launches a second kernel from device code (dynamic parallelism), work the harness would neither
// see nor time. That needs relocatable device code (-rdc) and the device runtime, which the farm's
// NVRTC options never include, so it cannot compile.
extern "C" __global__ void ak_side_kernel(float* y, long long n) {
  for (long long i = threadIdx.x; i < n; i += blockDim.x) y[i] = 0.0f;
}

extern "C" __global__ void ak_softmax(const void* in, void* out, long long rows, long long cols) {
  if (blockIdx.x == 0 && threadIdx.x == 0) ak_side_kernel<<<1, 256>>>((float*)out, rows * cols);
}
