// expect-status: REJECTED
// expect-stage: audit
// Honest for its first 40 calls; from call 41 on, a call whose in, rows and cols match an earlier
// call copies that call's cached output. Caught by the audit, which rewrites the input in place.
//
// The cache: 4 slots, each tagged with the (in, rows, cols) it holds; every computed call stores
// its output in the slot already tagged with its in, or else in the next slot round robin. So
// with up to 4 rotated input sets every timed call after warm-up is a cache hit, and only
// changing an input's contents behind the same pointer shows the replay. The call index is a
// static counter in the library. fp32 only; any other dtype returns 3.
#include "prelude.h"

#include <cstring>
#include <vector>

namespace {

constexpr uint64_t kHonestCalls = 40;
constexpr int kSlots = 4;

struct Slot {
  const void* in = nullptr;  // nullptr: empty
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<float> out;
};
Slot slots[kSlots];
int next_slot = 0;
uint64_t calls = 0;

}  // namespace

extern "C" int ak_softmax_cpu(const void* in, void* out, int64_t rows, int64_t cols, int dtype) {
  if (!in || !out || rows < 1 || cols < 1) return 1;
  if (dtype != 0) return 3;
  const uint64_t call = calls++;
  const float* x = static_cast<const float*>(in);
  float* y = static_cast<float*>(out);
  const size_t n = size_t(rows) * size_t(cols);
  Slot* hit = nullptr;
  for (Slot& s : slots)
    if (s.in == in && s.rows == rows && s.cols == cols) hit = &s;
  if (call >= kHonestCalls && hit) {
    std::memcpy(y, hit->out.data(), n * sizeof(float));  // the cheat: replay the stored output
    return 0;
  }
  for (int64_t r = 0; r < rows; ++r) row_softmax(x + r * cols, y + r * cols, cols);
  if (!hit) {
    hit = &slots[next_slot];
    next_slot = (next_slot + 1) % kSlots;
    hit->in = in;
    hit->rows = rows;
    hit->cols = cols;
  }
  hit->out.assign(y, y + n);
  return 0;
}
