#include "worker/measure.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace ak::measure {

double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = std::clamp(q, 0.0, 1.0) * double(sorted.size() - 1);
  const size_t lo = size_t(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - double(lo);
  return sorted[lo] * (1 - frac) + sorted[hi] * frac;
}

double rel_se_of_median(std::vector<double> v) {
  const size_t n = v.size();
  if (n < 2) return std::numeric_limits<double>::infinity();
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / double(n);
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  var /= double(n - 1);
  std::sort(v.begin(), v.end());
  const double median = percentile(v, 0.5);
  if (median <= 0) return std::numeric_limits<double>::infinity();
  return 1.2533 * std::sqrt(var) / std::sqrt(double(n)) / median;
}

Stats summarize(std::vector<double> v) {
  Stats s;
  s.n = int(v.size());
  if (v.empty()) return s;
  s.rel_se = rel_se_of_median(v);
  if (!std::isfinite(s.rel_se)) s.rel_se = kRelSeUnknown;
  std::sort(v.begin(), v.end());
  s.median = percentile(v, 0.5);
  s.p10 = percentile(v, 0.1);
  s.p90 = percentile(v, 0.9);
  s.min = v.front();
  s.max = v.back();
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
  double var = 0;
  for (double x : v) var += (x - s.mean) * (x - s.mean);
  var /= double(v.size());
  s.cv = s.mean > 0 ? std::sqrt(var) / s.mean : 0;
  return s;
}

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::kNoiseTarget: return "noise_target";
    case StopReason::kMaxSamples: return "max_samples";
    case StopReason::kTimeLimit: return "time_limit";
  }
  return "?";
}

PairedSamples sample_alternating(const MeasureOptions& o, const std::function<double(int)>& candidate,
                                 const std::function<double(int)>& baseline,
                                 const std::function<double()>& elapsed_ms) {
  PairedSamples s;
  const int min_samples = std::max(1, o.min_samples);
  const int max_samples = std::max(min_samples, o.max_samples);
  for (int i = 0;; ++i) {
    if (i >= min_samples) {
      if (i >= max_samples) {
        s.stop = StopReason::kMaxSamples;
        break;
      }
      if (elapsed_ms() >= double(o.max_time_ms)) {
        s.stop = StopReason::kTimeLimit;
        break;
      }
      if (o.noise_target > 0 && rel_se_of_median(s.candidate_us) <= o.noise_target &&
          rel_se_of_median(s.baseline_us) <= o.noise_target) {
        s.stop = StopReason::kNoiseTarget;
        break;
      }
    }
    s.candidate_us.push_back(candidate(i));
    s.baseline_us.push_back(baseline(i));
  }
  return s;
}

double roofline_floor_us(double flops, double bytes, double bandwidth_gbps, double peak_tflops) {
  double floor_s = 0;
  if (bandwidth_gbps > 0 && bytes > 0) floor_s = std::max(floor_s, bytes / (bandwidth_gbps * 1e9));
  if (peak_tflops > 0 && flops > 0) floor_s = std::max(floor_s, flops / (peak_tflops * 1e12));
  return floor_s * 1e6;
}

std::string bound_of(double flops, double bytes, double bandwidth_gbps, double peak_tflops) {
  if (bandwidth_gbps <= 0 || peak_tflops <= 0 || bytes <= 0) return "unknown";
  const double intensity = flops / bytes;                            // FLOP per byte
  const double ridge = peak_tflops * 1e12 / (bandwidth_gbps * 1e9);  // FLOP per byte
  return intensity < ridge ? "memory" : "compute";
}

}  // namespace ak::measure
