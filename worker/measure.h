// The farm's measurement library: sample statistics, the adaptive stopping rule, candidate and
// baseline sampled in alternation, and the roofline floor. No libtorch and no CUDA here: the
// sandbox (worker/sandbox/harness.cc) supplies the timed calls, so the same rules serve the cpu
// and the cuda backend and are unit-tested without a GPU (tests/worker/measure_test.cc).
//
// How one GPU sample is taken is the sandbox's business (L2 flush, blocking kernel, events); see
// worker/sandbox/VERIFICATION.md, "Measurement".
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/job.h"

namespace ak::measure {

struct Stats {
  int n = 0;
  double median = 0, mean = 0, p10 = 0, p90 = 0, min = 0, max = 0;
  double cv = 0;      // population stdev / mean
  // Relative standard error of the median (rel_se_of_median), or kRelSeUnknown where it is not
  // finite (one sample, or a median <= 0): results travel as JSON, which has no infinity (it would
  // be sent as null, and a reader refuses a null number).
  double rel_se = 0;
};
constexpr double kRelSeUnknown = -1;

// Linear interpolation between order statistics; `sorted` ascending, q in [0, 1].
double percentile(const std::vector<double>& sorted, double q);
// 1.2533 * stdev / sqrt(n) / median: the normal approximation of the standard error of the
// median, relative to it. Infinite for fewer than two samples or a median <= 0.
double rel_se_of_median(std::vector<double> v);
Stats summarize(std::vector<double> v);

enum class StopReason { kNoiseTarget, kMaxSamples, kTimeLimit };
const char* stop_reason_name(StopReason r);  // "noise_target", "max_samples", "time_limit"

struct PairedSamples {
  std::vector<double> candidate_us;
  std::vector<double> baseline_us;
  StopReason stop = StopReason::kMaxSamples;
};

// Samples candidate and baseline in alternation (candidate first), so that drift in clocks or
// temperature hits both alike. Before each pair it applies the stopping rule:
//   - never stop before min_samples pairs (at least 1);
//   - stop at max_samples pairs, or when elapsed_ms() >= max_time_ms;
//   - stop when noise_target > 0 and the rel_se_of_median of both series is <= noise_target.
// `candidate(i)` and `baseline(i)` take one sample [us] of pair i; exceptions propagate.
// `elapsed_ms` is the measurement time so far (injected so that tests control it).
PairedSamples sample_alternating(const MeasureOptions& options, const std::function<double(int)>& candidate,
                                 const std::function<double(int)>& baseline,
                                 const std::function<double()>& elapsed_ms);

// The fastest a call can possibly be [us]: its bytes at `bandwidth_gbps` or its FLOPs at
// `peak_tflops`, whichever takes longer. A ceiling <= 0 is left out; 0 when both are.
double roofline_floor_us(double flops, double bytes, double bandwidth_gbps, double peak_tflops);

// "memory" when flops / bytes is below the ridge point peak_tflops / bandwidth_gbps, else
// "compute"; "unknown" without both ceilings.
std::string bound_of(double flops, double bytes, double bandwidth_gbps, double peak_tflops);

// True when the bytes of the timed calls came from the last-level cache rather than DRAM: the
// samples were taken hot (`cold` false: no flush between them) and the working set [bytes] (every
// input set the calls rotate over, plus the output) fits in `cache_bytes`. False where either
// size is unknown (<= 0).
bool cache_resident(double working_set_bytes, double cache_bytes, bool cold);

// Holds a timed call against the ceilings that apply to it. From m.flops, m.bytes, m.latency_us
// and m.cold_l2 it fills the achieved rates, the measured and datasheet ceilings for `dtype` (the
// keys of Ceilings' maps), `bound`, `cache_resident`, `pct_peak` and `pct_peak_datasheet`. A
// memory-bound call that is cache-resident gets no percentage (0): the bandwidth ceilings are
// DRAM's, measured on buffers far larger than any cache, and a row served from cache would read
// as more than 100% of them. A compute-bound call keeps its percentage of the GEMM rate.
void hold_to_ceilings(Measurement& m, const Ceilings& c, const std::string& dtype, double working_set_bytes);

// The largest data or unified cache listed under `cache_dir` [bytes] (Linux sysfs: index*/type,
// index*/level and index*/size such as "2048K"): the CPU's last-level cache; 0 where none can be
// read. Reads files; safe from any thread.
int64_t cpu_last_level_cache_bytes(const std::string& cache_dir = "/sys/devices/system/cpu/cpu0/cache");

}  // namespace ak::measure
