// expect-status: COMPILE_ERROR
// expect-stage: compile
// Includes /etc/passwd, whose lines NVRTC would quote in its errors, and so in the reason every
// client reads. An absolute (or "..") include is refused before NVRTC runs, naming the line only;
// hostile_test.cc checks that no reason holds "root:x:0:0".
#include "/etc/passwd"

extern "C" __global__ void ak_softmax(const void* in, void* out, long long rows, long long cols) {}
