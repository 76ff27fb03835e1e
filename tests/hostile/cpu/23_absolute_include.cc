// expect-status: COMPILE_ERROR
// expect-stage: compile
// Includes /etc/passwd, whose lines the compiler would quote in its errors, and so in the reason
// every client reads. An absolute (or "..") include is refused before the compiler runs, naming the
// line only; hostile_test.cc checks that no reason holds "root:x:0:0".
#include "/etc/passwd"

extern "C" int ak_softmax_cpu(const void* in, void* out, long rows, long cols, int dtype) { return 1; }
