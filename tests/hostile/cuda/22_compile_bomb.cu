// expect-status: TIMEOUT
// expect-stage: compile
// 65,536 template instantiations, each a constant evaluation of 200,000 steps: NVRTC caps the steps
// of one evaluation but not their number, so it would compile for most of an hour (64 of them take
// about 2 s). NVRTC runs in its own process (autokernel-nvrtc) bounded by the job's timeout_ms, so
// the job ends TIMEOUT at the compile instead of holding its lease and a compile thread.

constexpr long spin(long k) {
  long s = 0;
  for (long i = 0; i < 200000; ++i) s += i ^ k;
  return s;
}
template <long Lo, long Hi, bool Leaf = (Hi - Lo == 1)>
struct Range {
  static constexpr long v = Range<Lo, (Lo + Hi) / 2>::v + Range<(Lo + Hi) / 2, Hi>::v;
};
template <long Lo, long Hi>
struct Range<Lo, Hi, true> {
  static constexpr long v = spin(Lo);
};
constexpr long value = Range<0, 65536>::v;

extern "C" __global__ void ak_softmax(const void* in, void* out, long long rows, long long cols) {
  if (threadIdx.x == 0 && blockIdx.x == 0 && rows > 0) static_cast<float*>(out)[0] = float(value & 1);
}
