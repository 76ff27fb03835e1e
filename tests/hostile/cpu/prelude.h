// The honest helpers that the CPU candidates share: a NaN-propagating max and one row's correct
// softmax with exp and the sum in double.
//
// Not a candidate: hostile_test.cc takes only *.cc files. A candidate that needs these helpers
// has the line `#include "prelude.h"` right after its header comment, and the runner replaces
// that exact line by this file's text before it submits the source: the farm compiles one source
// file in a temporary folder, so the source has to stand alone. (The include also resolves as
// written, next to the candidate, for an editor or a plain c++.)
//
// Only code that is the same in every candidate that uses it belongs here; a variant of a
// helper stays in its candidate. Nothing here cheats. Everything is in an anonymous namespace,
// so what a candidate does not call is not in its library.
#include <cmath>
#include <cstdint>

namespace {

// max(a, b), NaN when either is NaN.
inline float nan_max(float a, float b) { return (a > b || a != a) ? a : b; }

// Correct softmax of one row (max, sum of exp(x - max), write). maybe_unused: a candidate may
// include the prelude for nan_max alone (11).
[[maybe_unused]] void row_softmax(const float* x, float* y, int64_t cols) {
  float m = -INFINITY;
  for (int64_t j = 0; j < cols; ++j) m = nan_max(m, x[j]);
  double s = 0.0;
  for (int64_t j = 0; j < cols; ++j) s += std::exp(double(x[j]) - double(m));
  const double inv = 1.0 / s;
  for (int64_t j = 0; j < cols; ++j) y[j] = float(std::exp(double(x[j]) - double(m)) * inv);
}

}  // namespace
