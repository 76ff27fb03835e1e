#include "worker/measure.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>

namespace ak::measure {

double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = std::clamp(q, 0.0, 1.0) * double(sorted.size() - 1);
  const size_t lo = size_t(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - double(lo);
  // a * (1 - f) + a * f can round one ulp above a, which would put a median above its own p90;
  // a + (b - a) * f is exact when a == b, and the clamp keeps every quantile between its neighbours.
  const double a = sorted[lo], b = sorted[hi];
  return std::clamp(a + (b - a) * frac, a, b);
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

bool cache_resident(double working_set_bytes, double cache_bytes, bool cold) {
  return !cold && working_set_bytes > 0 && cache_bytes > 0 && working_set_bytes <= cache_bytes;
}

void hold_to_ceilings(Measurement& m, const Ceilings& c, const std::string& dtype, double working_set_bytes) {
  const double seconds = m.latency_us * 1e-6;
  if (seconds > 0) {
    m.throughput_tflops = m.flops / seconds / 1e12;
    m.bandwidth_gbps = m.bytes / seconds / 1e9;
  }
  auto get = [](const std::map<std::string, double>& mp, const std::string& k) {
    auto it = mp.find(k);
    return it == mp.end() ? 0.0 : it->second;
  };
  m.peak_bandwidth_gbps = c.copy_bandwidth_gbps;
  m.peak_tflops = get(c.gemm_tflops, dtype);
  m.datasheet_bandwidth_gbps = c.datasheet_bandwidth_gbps;
  m.datasheet_tflops = get(c.datasheet_tflops, dtype);
  m.bound = bound_of(m.flops, m.bytes, m.peak_bandwidth_gbps, m.peak_tflops);
  if (m.bound == "unknown" && m.peak_bandwidth_gbps > 0) m.bound = "memory";  // no compute ceiling measured
  m.cache_resident = cache_resident(working_set_bytes, double(c.cache_bytes), m.cold_l2);
  const bool compute = m.bound == "compute";
  auto pct = [&](double ceiling_bw, double ceiling_tf) {
    if (compute) return ceiling_tf > 0 ? 100.0 * m.throughput_tflops / ceiling_tf : 0.0;
    if (m.cache_resident) return 0.0;  // no cache bandwidth is measured; DRAM's does not apply
    return ceiling_bw > 0 ? 100.0 * m.bandwidth_gbps / ceiling_bw : 0.0;
  };
  m.pct_peak = pct(m.peak_bandwidth_gbps, m.peak_tflops);
  m.pct_peak_datasheet = pct(m.datasheet_bandwidth_gbps, m.datasheet_tflops);
}

int64_t cpu_last_level_cache_bytes(const std::string& cache_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  int best_level = -1;
  int64_t best_bytes = 0;
  for (const auto& e : fs::directory_iterator(cache_dir, ec)) {
    if (e.path().filename().string().rfind("index", 0) != 0) continue;
    auto read = [&](const char* name) {
      std::ifstream in(e.path() / name);
      std::string v;
      in >> v;
      return v;
    };
    const std::string type = read("type");
    if (type != "Data" && type != "Unified") continue;
    int level = 0;
    int64_t bytes = 0;
    try {
      level = std::stoi(read("level"));
      const std::string size = read("size");  // "2048K", "32M" or plain bytes
      size_t used = 0;
      bytes = std::stoll(size, &used);
      const char unit = used < size.size() ? size[used] : ' ';
      bytes <<= unit == 'K' ? 10 : unit == 'M' ? 20 : unit == 'G' ? 30 : 0;
    } catch (const std::exception&) {
      continue;  // an unreadable entry says nothing
    }
    if (bytes > 0 && (level > best_level || (level == best_level && bytes > best_bytes))) {
      best_level = level;
      best_bytes = bytes;
    }
  }
  return best_bytes;
}

}  // namespace ak::measure
