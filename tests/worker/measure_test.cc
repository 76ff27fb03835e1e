// The measurement library: statistics, the stopping rule of alternated sampling, roofline.
#include "worker/measure.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "worker/nvml.h"

namespace ak::measure {
namespace {

TEST(Stats, SummarizeGivesOrderStatisticsAndSpread) {
  Stats s = summarize({5, 1, 4, 2, 3});
  EXPECT_EQ(s.n, 5);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_DOUBLE_EQ(s.p10, 1.4);
  EXPECT_DOUBLE_EQ(s.p90, 4.6);
  EXPECT_NEAR(s.cv, std::sqrt(2.0) / 3.0, 1e-12);
  // stdev (n-1) = sqrt(2.5); 1.2533 * sqrt(2.5) / sqrt(5) / 3
  EXPECT_NEAR(s.rel_se, 1.2533 * std::sqrt(2.5) / std::sqrt(5.0) / 3.0, 1e-12);
}

TEST(Stats, QuantilesOfEqualSamplesAreThatSampleExactlyAndNeverOutOfOrder) {
  // Two equal samples interpolated as a * 0.9 + a * 0.1 came out one ulp above a (433.33430083714836 for
  // 433.3343008371483), and a CI run once saw a median above its p90 that way.
  EXPECT_EQ(measure::percentile({433.3343008371483, 433.3343008371483}, 0.1), 433.3343008371483);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(1, 1000);
  for (int n = 1; n < 40; ++n) {
    for (int t = 0; t < 50; ++t) {
      std::vector<double> v(static_cast<size_t>(n));
      const double same = u(rng);
      for (auto& x : v) x = t % 2 ? same : u(rng);
      auto s = measure::summarize(v);
      ASSERT_LE(s.min, s.p10);
      ASSERT_LE(s.p10, s.median);
      ASSERT_LE(s.median, s.p90);
      ASSERT_LE(s.p90, s.max);
      if (t % 2) {
        ASSERT_EQ(s.p10, same);
        ASSERT_EQ(s.median, same);
        ASSERT_EQ(s.p90, same);
      }
    }
  }
}

TEST(Stats, RelativeStandardErrorIsInfiniteWithoutTwoSamples) {
  EXPECT_TRUE(std::isinf(rel_se_of_median({})));
  EXPECT_TRUE(std::isinf(rel_se_of_median({3.0})));
  EXPECT_DOUBLE_EQ(rel_se_of_median({2.0, 2.0, 2.0}), 0.0);
}

TEST(Stats, OneSampleReportsTheRelativeStandardErrorAsUnknownAndTheMeasurementSurvivesJson) {
  const Stats one = summarize({7.5});
  EXPECT_EQ(one.n, 1);
  EXPECT_DOUBLE_EQ(one.median, 7.5);
  EXPECT_EQ(one.rel_se, kRelSeUnknown);
  // The sandbox copies it into its reply; the worker parses that reply. With +inf the JSON held
  // null and the parse failed, which the worker reported as CRASH (protocol violation).
  Measurement m;
  m.latency_us = one.median;
  m.samples = one.n;
  m.rel_se = one.rel_se;
  const std::string wire = nlohmann::json(m).dump();
  EXPECT_EQ(wire.find("null"), std::string::npos) << wire;
  const Measurement back = nlohmann::json::parse(wire).get<Measurement>();
  EXPECT_EQ(back.rel_se, kRelSeUnknown);
  EXPECT_EQ(back.samples, 1);
  EXPECT_EQ(summarize({-1.0, -1.0}).rel_se, kRelSeUnknown);  // a median <= 0: no relative error either
  EXPECT_GT(summarize({1.0, 2.0}).rel_se, 0);
}

MeasureOptions options(int min, int max, double noise, int64_t max_ms) {
  MeasureOptions o;
  o.min_samples = min;
  o.max_samples = max;
  o.noise_target = noise;
  o.max_time_ms = max_ms;
  return o;
}

TEST(Sampling, QuietSeriesStopAtTheNoiseTargetAfterMinSamples) {
  int calls = 0;
  PairedSamples s = sample_alternating(
      options(10, 500, 0.005, 1'000'000), [&](int) { return 100.0 + (++calls % 2) * 0.01; },
      [&](int) { return 50.0; }, [] { return 0.0; });
  EXPECT_EQ(s.stop, StopReason::kNoiseTarget);
  EXPECT_EQ(s.candidate_us.size(), 10u);
  EXPECT_EQ(s.baseline_us.size(), 10u);
}

TEST(Sampling, NoisySeriesRunToMaxSamples) {
  int i = 0;
  PairedSamples s = sample_alternating(
      options(10, 40, 0.005, 1'000'000), [&](int) { return (++i % 2) ? 50.0 : 150.0; }, [&](int) { return 50.0; },
      [] { return 0.0; });
  EXPECT_EQ(s.stop, StopReason::kMaxSamples);
  EXPECT_EQ(s.candidate_us.size(), 40u);
}

TEST(Sampling, TimeLimitStopsOnlyAfterMinSamples) {
  double now = 0;
  int i = 0;
  PairedSamples s = sample_alternating(
      options(12, 500, 0.005, 100),
      [&](int) {
        now += 60;  // every sample takes 60 ms: the limit passes after two
        return (++i % 2) ? 50.0 : 150.0;
      },
      [&](int) { return 50.0; }, [&] { return now; });
  EXPECT_EQ(s.stop, StopReason::kTimeLimit);
  EXPECT_EQ(s.candidate_us.size(), 12u);
}

TEST(Sampling, CandidateAndBaselineAlternate) {
  std::vector<std::string> order;
  sample_alternating(
      options(3, 3, 0, 1000), [&](int i) { order.push_back("c" + std::to_string(i)); return 1.0; },
      [&](int i) { order.push_back("b" + std::to_string(i)); return 1.0; }, [] { return 0.0; });
  EXPECT_EQ(order, (std::vector<std::string>{"c0", "b0", "c1", "b1", "c2", "b2"}));
}

TEST(Roofline, FloorIsTheSlowerOfBytesAndFlops) {
  // 4.8e12 bytes at 4800 GB/s = 1 s; 1e12 FLOPs at 1000 TFLOP/s = 1 ms; 1e16 FLOPs = 10 s.
  EXPECT_NEAR(roofline_floor_us(1e12, 4.8e12, 4800, 1000), 1e6, 1e-6);
  EXPECT_NEAR(roofline_floor_us(1e16, 4.8e12, 4800, 1000), 1e7, 1e-6);
  EXPECT_NEAR(roofline_floor_us(1e12, 4.8e12, 0, 1000), 1e3, 1e-9);  // unknown bandwidth: flops only
  EXPECT_DOUBLE_EQ(roofline_floor_us(1e12, 4.8e12, 0, 0), 0.0);
}

TEST(Roofline, BoundFollowsTheRidgePoint) {
  // ridge of 1000 TFLOP/s over 4000 GB/s: 250 FLOP/byte
  EXPECT_EQ(bound_of(5.0 * 1e6, 4e6, 4000, 1000), "memory");     // softmax-like: ~1 FLOP/byte
  EXPECT_EQ(bound_of(2.0 * 4096.0 * 4096 * 4096, 3.0 * 2 * 4096 * 4096, 4000, 1000), "compute");  // GEMM
  EXPECT_EQ(bound_of(1, 1, 0, 1000), "unknown");
}

// A CPU row like the ones of issue 22: 8 MiB moved in 10 us is 839 GB/s, about four times a
// DRAM copy bandwidth of 200 GB/s, because the bytes came from a 32 MiB last-level cache.
Measurement hot_call(double latency_us) {
  Measurement m;
  m.flops = 1e6;
  m.bytes = 8.0 * (1 << 20);
  m.latency_us = latency_us;
  m.cold_l2 = false;
  return m;
}
Ceilings cpu_ceilings() {
  Ceilings c;
  c.copy_bandwidth_gbps = 200;
  c.cache_bytes = int64_t(32) << 20;
  return c;
}

TEST(Roofline, ARowWhoseWorkingSetExceedsTheCacheGetsItsPercentOfTheDramCeiling) {
  Measurement m = hot_call(100);
  hold_to_ceilings(m, cpu_ceilings(), "fp32", 64.0 * (1 << 20));  // twice the cache
  EXPECT_FALSE(m.cache_resident);
  EXPECT_EQ(m.bound, "memory");
  EXPECT_NEAR(m.bandwidth_gbps, 83.886, 1e-3);
  EXPECT_NEAR(m.pct_peak, 100.0 * m.bandwidth_gbps / 200, 1e-9);
  EXPECT_GT(m.pct_peak, 0);
}

TEST(Roofline, ACacheResidentMemoryBoundRowIsMarkedAndHasNoPercentOfDram) {
  Measurement m = hot_call(10);
  hold_to_ceilings(m, cpu_ceilings(), "fp32", 16.0 * (1 << 20));
  EXPECT_TRUE(m.cache_resident);
  EXPECT_GT(m.bandwidth_gbps, 200);  // what used to read as 419% of peak
  EXPECT_LE(m.pct_peak, 100.0);
  EXPECT_DOUBLE_EQ(m.pct_peak, 0.0);
  EXPECT_DOUBLE_EQ(m.pct_peak_datasheet, 0.0);
}

TEST(Roofline, AColdTimedRowIsNeverCacheResidentWhateverItsSize) {
  Measurement m = hot_call(100);
  m.cold_l2 = true;  // the L2 was flushed before every sample: the bytes came from DRAM
  hold_to_ceilings(m, cpu_ceilings(), "fp32", 1024);
  EXPECT_FALSE(m.cache_resident);
  EXPECT_GT(m.pct_peak, 0);
}

TEST(Roofline, AnUnknownCacheSizeMarksNothing) {
  EXPECT_FALSE(cache_resident(1024, 0, false));
  EXPECT_FALSE(cache_resident(0, 1 << 20, false));
  EXPECT_TRUE(cache_resident(1 << 20, 1 << 20, false));
  EXPECT_FALSE(cache_resident((1 << 20) + 1, 1 << 20, false));
}

TEST(Roofline, ACacheResidentComputeBoundRowKeepsItsPercentOfTheGemmRate) {
  Measurement m = hot_call(100);
  m.flops = 2.0 * 1024 * 1024 * 1024;  // a 1024^3 GEMM
  m.bytes = 3.0 * 4 * 1024 * 1024;
  Ceilings c = cpu_ceilings();
  c.gemm_tflops["fp32"] = 0.1;
  hold_to_ceilings(m, c, "fp32", m.bytes);
  EXPECT_EQ(m.bound, "compute");
  EXPECT_TRUE(m.cache_resident);
  EXPECT_NEAR(m.pct_peak, 100.0 * m.throughput_tflops / 0.1, 1e-9);
}

TEST(CpuCache, TheLastLevelCacheIsTheLargestLevelOfDataOrUnifiedCache) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / ("cpu_cache_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  auto entry = [&](const std::string& name, const std::string& level, const std::string& type,
                   const std::string& size) {
    std::filesystem::create_directories(dir / name);
    std::ofstream(dir / name / "level") << level << "\n";
    std::ofstream(dir / name / "type") << type << "\n";
    std::ofstream(dir / name / "size") << size << "\n";
  };
  entry("index0", "1", "Data", "48K");
  entry("index1", "1", "Instruction", "64K");
  entry("index2", "2", "Unified", "2048K");
  EXPECT_EQ(cpu_last_level_cache_bytes(dir.string()), int64_t(2048) << 10);
  entry("index3", "3", "Unified", "32M");
  EXPECT_EQ(cpu_last_level_cache_bytes(dir.string()), int64_t(32) << 20);
  EXPECT_EQ(cpu_last_level_cache_bytes((dir / "absent").string()), 0);
  std::filesystem::remove_all(dir);
}

TEST(Nvml, ReasonNamesAndThrottleMask) {
  EXPECT_EQ(reason_names(0), "none");
  EXPECT_EQ(reason_names(kReasonGpuIdle | kReasonSwPowerCap), "gpu_idle|sw_power_cap");
  EXPECT_EQ(reason_names(uint64_t(1) << 40), "other");
  EXPECT_TRUE(kThrottleMask & kReasonHwThermal);
  EXPECT_FALSE(kThrottleMask & kReasonGpuIdle);
  EXPECT_FALSE(kThrottleMask & kReasonApplicationsClocks);
}

TEST(Nvml, OpenFailsWithAReasonWhereThereIsNoDevice) {
  auto n = Nvml::open("0000:ff:1f.7");
  ASSERT_FALSE(n.ok());  // no NVML here, or no device at that bus id
  EXPECT_FALSE(n.status().message().empty());
}

}  // namespace
}  // namespace ak::measure
