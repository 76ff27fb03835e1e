// expect-status: TIMEOUT
// expect-stage: compile
// Ten constant expressions of about 10^10 steps each: the host compiler spends some seconds on each
// before its evaluation limit stops it, about a minute in all. The compile is bounded by the job's
// timeout_ms (its process group is killed), so the job ends TIMEOUT at the compile instead of
// holding its lease.
#include <cstdint>

constexpr long spin(long k) {
  long s = 0;
  for (long i = 0; i < 100000; ++i)
    for (long j = 0; j < 100000; ++j) s += i ^ j ^ k;
  return s;
}
#define AK_V(n) constexpr long v##n = spin(n)
AK_V(0);
AK_V(1);
AK_V(2);
AK_V(3);
AK_V(4);
AK_V(5);
AK_V(6);
AK_V(7);
AK_V(8);
AK_V(9);

extern "C" int ak_softmax_cpu(const void* in, void* out, int64_t rows, int64_t cols, int dtype) {
  return static_cast<int>((v0 + v9) & 1);
}
