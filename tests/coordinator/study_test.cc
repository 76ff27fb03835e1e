// Study campaigns (coordinator/study.h) driven by a simulated farm: jobs are proposed to free
// slots, "run" by completing the oldest in-flight ones with a known cost function, and the
// progress rebuilt from the records after every step, as the coordinator does.
#include "coordinator/study.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "tests/integration/data/study_space.h"

namespace ak {
namespace {

using nlohmann::json;

json designed_study(const std::string& strategy, int64_t seed, int64_t budget) {
  return testing::designed_study("designed-" + strategy, strategy, seed, budget, "// the candidate's text");
}
using testing::designed_cost;

// Deterministic multiplicative noise in [1 - amp, 1 + amp] from a job id.
double noise(const std::string& id, double amp) {
  uint64_t h = 1469598103934665603ull;
  for (char ch : id) h = (h ^ uint8_t(ch)) * 1099511628211ull;
  return 1.0 + amp * (double(h % 20001) / 10000.0 - 1.0);
}

// Multiplicative timing noise like a loaded 2-core farm's, deterministic per job id: uniform within
// +-3%, and one job in ten slowed by a further 0..10% (a compile or another worker's burst).
// Multiplicative timing noise like a loaded 2-core farm's, deterministic per job id: uniform
// within +-3%, and one job in ten slowed by a further 0..10% (a compile or another worker's burst
// beside it; the farm test has seen the best point measured 10% high).
double farm_noise(const std::string& id) {
  uint64_t h = 1469598103934665603ull;
  for (char ch : id) h = (h ^ uint8_t(ch)) * 1099511628211ull;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  const double base = 1.0 + 0.03 * (double(h % 20001) / 10000.0 - 1.0);
  const uint64_t g = h / 20001;
  return g % 10 == 0 ? base * (1.0 + 0.10 * double((g / 10) % 1001) / 1000.0) : base;
}

struct SimFarm {
  std::string cid = "c1";
  std::map<std::string, JobRecord> jobs;
  std::map<std::string, ResultRecord> results;
  std::vector<std::string> flight;  // in dispatch order
  std::vector<std::string> order;   // proposal order
  int64_t now = 1000;
  SharedMemoryLimits shared_memory;  // what the simulated workers announced

  StudyProgress progress(const StudyCampaign& c) const {
    std::vector<const JobRecord*> v;
    for (const auto& [id, j] : jobs) v.push_back(&j);
    return study_progress(c, cid, 0, v, results, now, shared_memory);
  }

  // Proposes to fill `slots` and returns the new jobs.
  std::vector<JobSpec> fill(const StudyCampaign& c, int64_t slots, const std::string& model = "cpu") {
    StudyProgress p = progress(c);
    std::map<std::string, int64_t> free = {{model, slots - int64_t(flight.size())}};
    std::vector<JobSpec> out = propose_study_jobs(c, cid, p, &free, shared_memory);
    for (const JobSpec& s : out) {
      EXPECT_FALSE(jobs.count(s.job_id)) << "job id proposed twice: " << s.job_id;
      JobRecord r;
      r.spec = s;
      r.state = JobState::kLeased;
      jobs[s.job_id] = r;
      flight.push_back(s.job_id);
      order.push_back(s.job_id);
    }
    return out;
  }

  // Completes the `n` oldest jobs in flight with latency value(config) (nullopt: a failure).
  void complete(size_t n, const std::function<std::optional<double>(const JobSpec&)>& value) {
    for (size_t i = 0; i < n && !flight.empty(); ++i) {
      JobRecord& j = jobs.at(flight.front());
      flight.erase(flight.begin());
      j.state = JobState::kDone;
      ResultRecord r;
      r.job_id = j.spec.job_id;
      if (auto v = value(j.spec)) {
        r.status = ResultStatus::kPass;
        r.m.latency_us = *v;
        r.m.baseline_us = 150;
      } else {
        r.status = ResultStatus::kFail;
      }
      results[r.job_id] = r;
      now += 10;
    }
  }

  // Runs campaign c with `slots` slots, completing half the slots each step, until complete.
  void run(const StudyCampaign& c, int64_t slots, const std::function<std::optional<double>(const JobSpec&)>& value,
           const std::string& model = "cpu") {
    for (int step = 0; step < 100000; ++step) {
      fill(c, slots, model);
      if (progress(c).complete) return;
      ASSERT_FALSE(flight.empty()) << "study not complete but nothing in flight";
      complete(size_t(std::max<int64_t>(1, slots / 2)), value);
    }
    FAIL() << "study never completed";
  }
};

StudyCampaign parse(const json& doc) {
  auto c = parse_study_campaign(doc);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : StudyCampaign{};
}

std::string error_of(const json& doc) {
  auto c = parse_study_campaign(doc);
  return c.ok() ? "" : c.status().message();
}

TEST(StudyTest, ParseRejectsBadDocumentsWithTheKeyAtFault) {
  json d = designed_study("evolutionary", 1, 10);
  EXPECT_EQ(error_of(d), "");
  auto with = [&](const std::string& k, json v) {
    json x = d;
    x[k] = std::move(v);
    return error_of(x);
  };
  EXPECT_NE(with("bogus", 1).find("unknown key 'bogus'"), std::string::npos);
  EXPECT_NE(with("strategy", "annealing").find("unknown strategy 'annealing'; expected one of exhaustive"),
            std::string::npos);
  EXPECT_NE(with("budget", {{"trials", 0}}).find("'budget.trials' must be within"), std::string::npos);
  EXPECT_NE(with("plateau", {{"min_improvement", 2}}).find("plateau.min_improvement"), std::string::npos);
  EXPECT_NE(with("targets", json::array()).find("needs 'targets'"), std::string::npos);
  EXPECT_NE(with("targets", {{{"kernel_type", "nope"}}}).find("unknown kernel_type 'nope'"), std::string::npos);
  EXPECT_NE(with("targets", {{{"kernel_type", "softmax"}, {"shape", {8}}}}).find("bad shape 8"), std::string::npos);
  EXPECT_NE(with("targets", {{{"kernel_type", "softmax"}, {"share", 0.5}}, {{"kernel_type", "reduce"}}})
                .find("'share' for every target or for none"),
            std::string::npos);
  EXPECT_NE(with("targets", {{{"kernel_type", "softmax"}, {"share", 0.7}}, {{"kernel_type", "reduce"}, {"share", 0.5}}})
                .find("sum to 1.2"),
            std::string::npos);
  EXPECT_NE(with("targets", {{{"kernel_type", "softmax"}, {"backend", "cuda"}}}).find("name the GPU models"),
            std::string::npos);
  json no_source = d;
  no_source.erase("source");
  EXPECT_NE(error_of(no_source).find("give its 'source' too"), std::string::npos);
  json bad_default = d;
  bad_default["space"][0]["default"] = 9;
  EXPECT_NE(error_of(bad_default).find("default 9 is not one of its values"), std::string::npos);
}

TEST(StudyTest, TargetsExpandOverShapesDtypesAndGpuModelsWithTheirShareSplit) {
  json d = {{"kind", "study"},
            {"backend", "cuda"},
            {"gpu_models", {"NVIDIA H200", "NVIDIA A100-SXM4-80GB"}},
            {"targets",
             {{{"kernel_type", "softmax"}, {"shapes", {{4096, 4096}, {8192, 32000}}}, {"dtype", "bf16"}, {"share", 0.4}},
              {{"kernel_type", "matmul"}, {"shape", {4096, 4096, 4096}}, {"dtypes", {"fp16", "bf16"}}, {"share", 0.5}}}}};
  StudyCampaign c = parse(d);
  ASSERT_EQ(c.studies.size(), 8u);  // (2 + 2) targets x 2 models
  EXPECT_EQ(c.studies[0].label, "softmax 4096x4096 bf16 cuda on NVIDIA H200");
  EXPECT_EQ(c.studies[1].gpu_model, "NVIDIA A100-SXM4-80GB");
  EXPECT_DOUBLE_EQ(c.studies[0].share, 0.2);
  EXPECT_DOUBLE_EQ(c.studies[7].share, 0.25);
  for (size_t i = 0; i < c.studies.size(); ++i) EXPECT_EQ(c.studies[i].index, int(i));
}

TEST(StudyTest, TheFirstTrialIsTheDefaultAndNoConfigurationRunsTwiceWithinTheBudget) {
  StudyCampaign c = parse(designed_study("evolutionary", 3, 40));
  SimFarm f;
  auto first = f.fill(c, 8);
  ASSERT_EQ(first.size(), 8u);
  EXPECT_EQ(first[0].config, (std::map<std::string, int64_t>{{"AK_A", 0}, {"AK_B", 0}, {"AK_C", 0}}));
  EXPECT_EQ(first[0].job_id, "c1-s000-000000");
  EXPECT_EQ(first[0].study, 0);
  EXPECT_EQ(first[0].source, "// the candidate's text");
  EXPECT_EQ(first[0].requires_.gpu_model, "cpu");
  f.run(c, 8, [](const JobSpec& s) { return designed_cost(s.config); });
  std::set<std::map<std::string, int64_t>> configs;
  for (const auto& [id, j] : f.jobs) EXPECT_TRUE(configs.insert(j.spec.config).second) << "twice: " << id;
  EXPECT_EQ(f.jobs.size(), 40u);
  const StudyProgress p = f.progress(c);
  EXPECT_EQ(p.studies[0].stop, search::StopReason::kBudget);
  EXPECT_EQ(p.studies[0].trials, 40u);
}

// A study's best speedup is its best trial's own: that job's latency against the PyTorch time
// measured in the same job, as its result row says, not the median PyTorch time of the whole study
// over the best latency (two figures for one trial, 0.921x in a table and 0.781x in the row).
TEST(StudyTest, TheStudysBestSpeedupIsTheBestTrialsOwnAsItsResultRowSaysIt) {
  StudyCampaign c = parse(designed_study("evolutionary", 3, 40));
  SimFarm f;
  f.fill(c, 4);
  f.complete(4, [](const JobSpec& s) { return designed_cost(s.config); });
  // Other PyTorch times per job (a noisy baseline), and each row's own ratio.
  double best_latency = 1e300, best_own = 0;
  int i = 0;
  for (auto& [id, r] : f.results) {
    if (r.status != ResultStatus::kPass) continue;
    r.m.baseline_us = 100.0 + 40.0 * i++;
    r.m.speedup = r.m.baseline_us / r.m.latency_us;
    if (r.m.latency_us < best_latency) {
      best_latency = r.m.latency_us;
      best_own = r.m.speedup;
    }
  }
  ASSERT_GT(i, 1);
  const protocol::StudyRow row = study_status_row(f.progress(c).studies[0]);
  ASSERT_TRUE(row.best.has_value());
  EXPECT_DOUBLE_EQ(row.best->latency_us, best_latency);
  EXPECT_DOUBLE_EQ(row.best->speedup, best_own);
  EXPECT_NE(row.best->speedup, row.baseline_us / best_latency) << "the median baseline is another figure";
}

// The same history gives the same proposals: what a restarted coordinator relies on. A second
// farm that is "restarted" (its records copied, the in-flight jobs kept) after 20 results
// proposes exactly what the first one does from there.
TEST(StudyTest, AStudyRebuiltFromItsRecordsProposesWhatTheUninterruptedOneDoes) {
  StudyCampaign c = parse(designed_study("tpe", 5, 48));
  SimFarm a;
  auto cost = [](const JobSpec& s) { return designed_cost(s.config) * noise(s.job_id, 0.05); };
  while (a.results.size() < 20) {
    a.fill(c, 6);
    a.complete(3, cost);
  }
  SimFarm b = a;  // the store as the restarted coordinator reads it
  a.run(c, 6, cost);
  b.run(c, 6, cost);
  EXPECT_EQ(a.order, b.order);
  ASSERT_EQ(a.jobs.size(), b.jobs.size());
  for (const auto& [id, j] : a.jobs) EXPECT_EQ(j.spec.config, b.jobs.at(id).spec.config) << id;
}

// The farm test's space (tests/integration/study_test.cc), simulated with 5% timing noise: both
// strategies find its unique best (cost 100; every other point 112 or more) within a quarter of
// its 256 points, for each of the five seeds the farm test uses. This keeps the farm test from
// depending on luck.
TEST(StudyTest, EvolutionaryAndTpeFindTheDesignedBestInAQuarterOfTheSpaceForSeedsOneToFive) {
  for (const std::string strategy : {"evolutionary", "tpe"}) {
    std::string line;
    for (int64_t seed = 1; seed <= 5; ++seed) {
      StudyCampaign c = parse(designed_study(strategy, seed, 64));
      SimFarm f;
      f.run(c, 8, [](const JobSpec& s) { return designed_cost(s.config) * noise(s.job_id, 0.05); });
      const StudyProgress p = f.progress(c);
      const StudyStatus& s = p.studies[0];
      EXPECT_EQ(s.trials, 64u);
      EXPECT_EQ(designed_cost(s.best_config), 100.0) << strategy << " seed " << seed << " best " << config_string(s.best_config);
      // The trial that first reached the best, for the record.
      size_t first = 0;
      for (size_t i = 0; i < s.history.size(); ++i)
        if (designed_cost(s.history[i].config) == 100.0) first = i + 1;
      line += " " + std::to_string(first);
    }
    std::printf("%s: trial that found the best, seeds 1..5:%s\n", strategy.c_str(), line.c_str());
  }
}

// What studies of the designed space reach over many seeds, judged as the farm test judges them.
struct NoisyRuns {
  double mean_gap = 0;          // mean over seeds of designed_cost(reported best) / 100 - 1
  double worst_group_gap = 0;   // the largest mean gap of five consecutive seeds (one farm test run)
  int misses = 0;               // seeds whose reported best is not the designed best
  int never_evaluated = 0;      // seeds that never proposed the designed best
  double mean_trial = 0;        // mean trial (0-based) that proposed it, over the seeds that did
};

// Studies of 64 trials for seeds 1..groups*5 on `slots` worker slots, measured with farm_noise;
// `tweak` edits the parsed campaign (its strategy options).
NoisyRuns noisy_runs(const std::string& strategy, int64_t groups, int64_t slots,
                     const std::function<void(StudyCampaign&)>& tweak) {
  NoisyRuns r;
  for (int64_t g = 0; g < groups; ++g) {
    double group = 0;
    for (int64_t seed = 5 * g + 1; seed <= 5 * g + 5; ++seed) {
      StudyCampaign c = parse(designed_study(strategy, seed, 64));
      tweak(c);
      SimFarm f;
      f.cid = "noisy" + std::to_string(seed);  // job ids, hence the noise, differ between seeds
      f.run(c, slots, [](const JobSpec& s) { return designed_cost(s.config) * farm_noise(s.job_id); });
      const StudyProgress p = f.progress(c);
      const StudyStatus& s = p.studies[0];
      EXPECT_EQ(s.trials, 64u);
      const double gap = designed_cost(s.best_config) / 100.0 - 1.0;
      bool evaluated = false;
      for (size_t i = 0; i < s.history.size(); ++i)
        if (designed_cost(s.history[i].config) == 100.0) {
          evaluated = true;
          r.mean_trial += double(i);
        }
      r.misses += gap > 0;
      r.never_evaluated += !evaluated;
      r.mean_gap += gap;
      group += gap;
    }
    r.worst_group_gap = std::max(r.worst_group_gap, group / 5);
  }
  r.mean_gap /= double(5 * groups);
  r.mean_trial /= double(std::max<int64_t>(1, 5 * groups - r.never_evaluated));
  return r;
}

// The bar on the farm is a mean gap of at most 3% over five seeds. With farm-like noise,
// 100 seeds (20 farm runs' worth) on 4 slots, measured: the plain genetic algorithm
// (local_search_probability 0) never proposes the designed best in 2 seeds and ends 3 off it, so
// one run of five has a mean gap of 4.8%; with its local search the strategy proposes the best in
// every seed, at trial 26.6 on average instead of 36.4, and reports it in every seed (tpe: 18.7,
// and 2 seeds where a neighbour measured faster). (Over seeds 1..300: 12 misses without local
// search, 1 with. Under heavier noise, one job in five up to 15% slow, the remaining misses are the best
// measured slower than a neighbour, which no strategy that measures each configuration once can
// avoid.)
TEST(StudyTest, EvolutionaryWithLocalSearchReachesTheDesignedBestUnderFarmLikeNoiseInEveryRunOfFiveSeeds) {
  const NoisyRuns plain =
      noisy_runs("evolutionary", 20, 4, [](StudyCampaign& c) { c.options.local_search_probability = 0; });
  const NoisyRuns memetic = noisy_runs("evolutionary", 20, 4, [](StudyCampaign&) {});
  const NoisyRuns tpe = noisy_runs("tpe", 20, 4, [](StudyCampaign&) {});
  for (const auto& [what, r] : {std::pair<std::string, NoisyRuns>{"evolutionary, no local search", plain},
                                {"evolutionary", memetic},
                                {"tpe", tpe}})
    std::printf("%-30s seeds 1..100: mean gap %.2f%%, worst run of five %.2f%%, best missed in %d, never proposed in "
                "%d, proposed at trial %.1f on average\n",
                what.c_str(), 100 * r.mean_gap, 100 * r.worst_group_gap, r.misses, r.never_evaluated, r.mean_trial);
  EXPECT_LE(memetic.worst_group_gap, 0.03);
  EXPECT_LE(memetic.mean_gap, 0.03);
  EXPECT_LT(memetic.never_evaluated, plain.never_evaluated);
  EXPECT_LE(memetic.misses, plain.misses);
}

TEST(StudyTest, CapacityFollowsTheSharesAndAPlateauedStudyStopsReceivingWork) {
  json d = designed_study("random", 1, 200);
  d.erase("targets");
  d.update({{"budget", {{"trials", 200}}},
            {"plateau", {{"window", 6}, {"min_improvement", 0.01}}},
            {"targets",
             {{{"kernel_type", "softmax"}, {"shape", {64, 1024}}, {"dtype", "fp32"}, {"share", 0.6}},
              {{"kernel_type", "matmul"}, {"shape", {64, 64, 64}}, {"dtype", "fp32"}, {"share", 0.1}}}}});
  StudyCampaign c = parse(d);
  SimFarm f;
  // softmax improves steadily, matmul never after its first result.
  int64_t softmax_step = 0;
  auto value = [&](const JobSpec& s) -> std::optional<double> {
    if (s.kernel_type == "softmax") return 140.0 * std::pow(0.95, double(softmax_step++));
    return 500.0;
  };
  // Exploration: one slot each first.
  auto first = f.fill(c, 2);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_NE(first[0].kernel_type, first[1].kernel_type);
  f.complete(2, value);
  auto next = f.fill(c, 14);
  size_t softmax = 0;
  for (const auto& j : next) softmax += j.kernel_type == "softmax";
  EXPECT_GT(softmax, next.size() / 2) << "the 0.6 share should get most of the slots";
  for (int i = 0; i < 60 && !f.progress(c).studies[1].done; ++i) {
    f.complete(4, value);
    f.fill(c, 14);
  }
  StudyProgress p = f.progress(c);
  ASSERT_TRUE(p.studies[1].done);
  EXPECT_EQ(p.studies[1].stop, search::StopReason::kPlateau);
  size_t matmul_jobs = 0;
  for (const auto& [id, j] : f.jobs) matmul_jobs += j.spec.kernel_type == "matmul";
  f.complete(f.flight.size(), value);
  f.fill(c, 14);
  size_t after = 0;
  for (const auto& [id, j] : f.jobs) after += j.spec.kernel_type == "matmul";
  EXPECT_EQ(after, matmul_jobs) << "a plateaued study got more work";
  EXPECT_FALSE(f.progress(c).studies[0].done);
  // The estimate: softmax at speedup 150 / best, matmul at 150/500 < 1 counts as 1.
  p = f.progress(c);
  const double s0 = p.studies[0].baseline_us / *p.studies[0].best_us;
  EXPECT_NEAR(p.amdahl.at("cpu"), 1.0 / (1.0 - 0.6 * (1.0 - 1.0 / s0)), 1e-9);
}

// The farm test's op (softmax 8x64) is so small that PyTorch runs at the bandwidth floor: with a
// worker's copy bandwidth calibrated low, the best trial's roofline exceeds the PyTorch time, the
// study's expected gain is 0 and allocation gave it no slot, while no stop rule ended it; the
// campaign never completed (seen on the farm: a study left at 47 of 64 trials, workers idle).
TEST(StudyTest, AStudyWhoseRooflineIsAboveThePytorchTimeStillRunsItsWholeBudget) {
  StudyCampaign c = parse(designed_study("evolutionary", 1, 20));
  SimFarm f;
  for (int step = 0; step < 1000 && !f.progress(c).complete; ++step) {
    f.fill(c, 4);
    if (f.progress(c).complete) break;
    ASSERT_FALSE(f.flight.empty()) << "the study stalled after " << f.results.size() << " results";
    // 100 times slower than PyTorch (150 us), as the farm test's candidate is, with the roofline
    // (latency * pct_peak / 100) at 160 us.
    f.complete(2, [](const JobSpec& s) { return 100 * designed_cost(s.config); });
    for (auto& [id, r] : f.results) r.m.pct_peak = 100.0 * 160.0 / r.m.latency_us;
  }
  const StudyProgress p = f.progress(c);
  EXPECT_TRUE(p.complete);
  EXPECT_EQ(p.studies[0].trials, 20u);
  EXPECT_EQ(p.studies[0].stop, search::StopReason::kBudget);
}

// Launch limits of the model and the starter's compile-time constraints (cuda_config_error): the
// feasible space of matmul bf16 on a 4090 is what is left of 1944 points.
TEST(StudyTest, CudaProposalsRespectTheModelsLaunchLimits) {
  json d = {{"kind", "study"},
            {"strategy", "random"},
            {"backend", "cuda"},
            {"gpu_models", {"NVIDIA GeForce RTX 4090"}},
            {"budget", {{"trials", 100000}}},
            {"plateau", {{"window", 0}}},
            {"targets", {{{"kernel_type", "matmul"}, {"shape", {4096, 4096, 4096}}, {"dtype", "bf16"}}}}};
  StudyCampaign c = parse(d);
  const kernels::KernelSpec* spec = kernels::find("matmul");
  SimFarm f;
  size_t n = 0;
  for (int i = 0; i < 200; ++i) {
    auto jobs = f.fill(c, 16, "nvidia geforce rtx 4090");
    if (jobs.empty()) break;
    for (const auto& j : jobs) {
      const auto g = spec->cuda_geometry(j.config, j.shape, j.dtype);
      EXPECT_LE(int64_t(g.shared_bytes) + spec->cuda_static_shared_bytes, 99 * 1024) << config_string(j.config);
      EXPECT_LE(g.block[0] * g.block[1] * g.block[2], 1024u) << config_string(j.config);
      EXPECT_EQ(spec->cuda_config_error(j.config, j.dtype), "") << "the starter would not compile "
                                                                << config_string(j.config);
      ++n;
    }
    f.complete(f.flight.size(), [](const JobSpec&) { return 100.0; });
  }
  EXPECT_GT(n, 0u);
  size_t feasible = 0;
  for (const auto& p : kernels::enumerate_space(spec->backends.at(Backend::kCuda).space)) {
    const auto g = spec->cuda_geometry(p, {4096, 4096, 4096}, DType::kBF16);
    feasible += g.shared_bytes + spec->cuda_static_shared_bytes <= 99 * 1024 &&
                spec->cuda_config_error(p, DType::kBF16).empty();
  }
  EXPECT_EQ(n, feasible) << "every feasible configuration once, nothing else";
  EXPECT_TRUE(f.progress(c).studies[0].done) << "the feasible space should run out";
  EXPECT_EQ(study_status_row(f.progress(c).studies[0]).stop, "EXHAUSTED");
}

// AK_WGMMA changes nothing in fp32 (the SIMT path runs either way): an fp32 matmul study never
// spends a trial on AK_WGMMA=1, which would time the AK_WGMMA=0 kernel a second time; bf16 does.
TEST(StudyTest, AnFp32MatmulStudyNeverProposesTheHopperSettingThatItIgnores) {
  for (const char* dtype : {"fp32", "bf16"}) {
    json d = {{"kind", "study"},
              {"strategy", "random"},
              {"backend", "cuda"},
              {"gpu_models", {"NVIDIA H100 80GB HBM3"}},
              {"budget", {{"trials", 64}}},
              {"plateau", {{"window", 0}}},
              {"targets", {{{"kernel_type", "matmul"}, {"shape", {4096, 4096, 4096}}, {"dtype", dtype}}}}};
    StudyCampaign c = parse(d);
    SimFarm f;
    size_t n = 0, wgmma = 0;
    for (int i = 0; i < 8; ++i) {
      auto jobs = f.fill(c, 8, "nvidia h100 80gb hbm3");
      for (const auto& j : jobs) {
        ++n;
        wgmma += j.config.count("AK_WGMMA") && j.config.at("AK_WGMMA") != 0;
      }
      f.complete(f.flight.size(), [](const JobSpec&) { return 100.0; });
    }
    EXPECT_EQ(n, 64u) << dtype;
    if (std::string(dtype) == "fp32")
      EXPECT_EQ(wgmma, 0u);
    else
      EXPECT_GT(wgmma, 0u) << "bf16 keeps both settings in its space";
  }
}

TEST(StudyTest, TheSharedMemoryLimitIsWhatWorkersAnnouncedAndTheNameOnlyWhereNoneDid) {
  Capabilities h200;
  h200.gpu_name = "NVIDIA H200";
  h200.shared_memory_per_block_bytes = 200 * 1024;  // not the name table's 227 KiB
  Capabilities smaller = h200;
  smaller.shared_memory_per_block_bytes = 180 * 1024;
  Capabilities old_worker = h200;
  old_worker.gpu_name = "NVIDIA A100-SXM4-80GB";
  old_worker.shared_memory_per_block_bytes = 0;  // from before the field
  SharedMemoryLimits limits;
  for (const Capabilities* w : {&h200, &smaller, &old_worker}) add_shared_memory_limit(*w, &limits);
  EXPECT_EQ(shared_memory_limit("nvidia h200", limits), 180 * 1024) << "the smallest of one model's workers";
  EXPECT_EQ(shared_memory_limit("NVIDIA A100-SXM4-80GB", limits), 163 * 1024) << "unknown: by name";
  EXPECT_EQ(shared_memory_limit("NVIDIA H200"), 227 * 1024);
}

// A model the name table does not know (99 KiB) whose workers announce 227 KiB: studies propose the
// configurations that need more than 99 KiB too, and none that need more than what was announced.
TEST(StudyTest, CudaProposalsFollowTheSharedMemoryLimitWorkersAnnounced) {
  json d = {{"kind", "study"},
            {"strategy", "random"},
            {"backend", "cuda"},
            {"gpu_models", {"NVIDIA Future GPU"}},
            {"budget", {{"trials", 100000}}},
            {"plateau", {{"window", 0}}},
            {"targets", {{{"kernel_type", "matmul"}, {"shape", {4096, 4096, 4096}}, {"dtype", "bf16"}}}}};
  StudyCampaign c = parse(d);
  const kernels::KernelSpec* spec = kernels::find("matmul");
  SimFarm f;
  f.shared_memory = {{"nvidia future gpu", 227 * 1024}};
  size_t above_name_table = 0;
  for (int i = 0; i < 200; ++i) {
    auto jobs = f.fill(c, 16, "nvidia future gpu");
    if (jobs.empty()) break;
    for (const auto& j : jobs) {
      const auto g = spec->cuda_geometry(j.config, j.shape, j.dtype);
      EXPECT_LE(int64_t(g.shared_bytes) + spec->cuda_static_shared_bytes, 227 * 1024) << config_string(j.config);
      above_name_table += g.shared_bytes > 99 * 1024;
    }
    f.complete(f.flight.size(), [](const JobSpec&) { return 100.0; });
  }
  EXPECT_GT(above_name_table, 0u) << "the name table's 99 KiB was used instead of the announced limit";
}

// The starter's static shared memory (KernelSpec::cuda_static_shared_bytes: the GEMMs' TMA
// mbarriers) counts beside the dynamic part of every launch, as the sandbox counts it: on a model
// whose announced limit a configuration fits by its dynamic part alone, matmul's and fused_mlp's
// (three GEMM launches) studies never propose it, neither as a `start` configuration nor from the
// strategy, and they propose one that fits with both and every other such configuration once.
TEST(StudyTest, CudaProposalsCountTheStartersStaticSharedMemoryBesideTheDynamic) {
  for (const char* type : {"matmul", "fused_mlp"}) {
    const kernels::KernelSpec* spec = kernels::find(type);
    const kernels::BackendSource& src = spec->backends.at(Backend::kCuda);
    const std::vector<int64_t> shape = src.default_shapes.at(0);
    const int64_t static_bytes = spec->cuda_static_shared_bytes;
    ASSERT_GT(static_bytes, 0) << type;
    // The most shared memory of any launch of a call.
    auto dynamic = [&](const search::Config& config) {
      int64_t most = 0;
      for (int p = 0; p < spec->cuda_phases; ++p) {
        const kernels::LaunchGeometry g = spec->cuda_phases > 1
                                              ? spec->cuda_phase_geometry(config, shape, DType::kBF16, p)
                                              : spec->cuda_geometry(config, shape, DType::kBF16);
        most = std::max<int64_t>(most, g.shared_bytes);
      }
      return most;
    };
    const search::Config def = kernels::default_config(src, DType::kBF16);
    search::Config tight = def, roomy = def;
    tight["AK_STAGES"] = 5;
    roomy["AK_GROUP_M"] = 1;
    // Between tight's dynamic part alone and its two parts together.
    const int64_t limit = dynamic(tight) + static_bytes / 2;
    ASSERT_LT(dynamic(roomy) + static_bytes, limit) << type;
    ASSERT_EQ(spec->cuda_config_error(tight, DType::kBF16), "") << type;
    ASSERT_EQ(spec->cuda_config_error(roomy, DType::kBF16), "") << type;

    json d = {{"kind", "study"},
              {"strategy", "random"},
              {"backend", "cuda"},
              {"gpu_models", {"NVIDIA Made-up GPU"}},
              {"budget", {{"trials", 100000}}},
              {"plateau", {{"window", 0}}},
              {"targets",
               {{{"kernel_type", type},
                 {"shape", shape},
                 {"dtype", "bf16"},
                 {"start", {{{"AK_STAGES", 5}}, {{"AK_GROUP_M", 1}}}}}}}};
    StudyCampaign c = parse(d);
    ASSERT_EQ(c.studies.size(), 1u);
    ASSERT_EQ(c.studies[0].start, (std::vector<search::Config>{tight, roomy})) << type;
    SimFarm f;
    f.shared_memory = {{"nvidia made-up gpu", limit}};
    auto first = f.fill(c, 2, "nvidia made-up gpu");
    ASSERT_EQ(first.size(), 2u) << type;
    EXPECT_EQ(first[0].config, def) << type;
    EXPECT_EQ(first[1].config, roomy) << type << ": tight, the first start configuration, is passed over";
    size_t n = first.size();
    for (int i = 0; i < 400; ++i) {
      f.complete(f.flight.size(), [](const JobSpec&) { return 100.0; });
      auto jobs = f.fill(c, 16, "nvidia made-up gpu");
      if (jobs.empty()) break;
      for (const auto& j : jobs) {
        EXPECT_NE(j.config, tight) << type;
        EXPECT_LE(dynamic(j.config) + static_bytes, limit) << type << " " << config_string(j.config);
        ++n;
      }
    }
    EXPECT_TRUE(f.progress(c).studies[0].done) << type << ": the feasible space should run out";
    size_t feasible = 0;
    for (const auto& p : kernels::enumerate_space(src.space))
      feasible += dynamic(p) + static_bytes <= limit && spec->cuda_config_error(p, DType::kBF16).empty();
    EXPECT_EQ(n, feasible) << type << ": every configuration that fits with its static part once, nothing else";
  }
}

// A target's `start` configurations (known good variants, the kernel READMEs' ladder): tried right
// after the default, in order, each once, and before the strategy proposes; completed with the
// dtype's defaults; one a GPU model cannot launch is passed over there; a restarted coordinator
// proposes the same sequence.
TEST(StudyTest, TheTargetsStartConfigurationsRunRightAfterTheDefaultInOrderOnceEach) {
  const json tma = {{"AK_WARPS_M", 2}, {"AK_WARPS_N", 4}, {"AK_BN", 256},        {"AK_BK", 64},
                    {"AK_STAGES", 4},  {"AK_WGMMA", 2},   {"AK_MAX_BLOCKS", 132}};
  json d = {{"kind", "study"},
            {"strategy", "random"},
            {"backend", "cuda"},
            {"gpu_models", {"NVIDIA H200"}},
            {"budget", {{"trials", 12}}},
            {"plateau", {{"window", 0}}},
            {"targets",
             {{{"kernel_type", "matmul"},
               {"shape", {4096, 4096, 4096}},
               {"dtype", "bf16"},
               // the TMA variant, one change of the default, the same again, and the default itself
               {"start", {tma, {{"AK_GROUP_M", 1}}, {{"AK_GROUP_M", 1}}, json::object()}}}}}};
  StudyCampaign c = parse(d);
  ASSERT_EQ(c.studies.size(), 1u);
  const kernels::KernelSpec* spec = kernels::find("matmul");
  const search::Config def = kernels::default_config(spec->backends.at(Backend::kCuda), DType::kBF16);
  search::Config tma_full = def, group = def;
  for (const auto& [k, v] : tma.items()) tma_full[k] = v.get<int64_t>();
  group["AK_GROUP_M"] = 1;
  EXPECT_EQ(c.studies[0].start, (std::vector<search::Config>{tma_full, group, def}))
      << "completed with bf16's defaults (AK_WGMMA=1 where not given), the repeat folded";

  SimFarm h200;
  auto first = h200.fill(c, 2, "nvidia h200");
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].config, def);
  EXPECT_EQ(first[1].config, tma_full) << "the first start configuration is the second trial";
  auto next = h200.fill(c, 5, "nvidia h200");
  ASSERT_EQ(next.size(), 3u);
  EXPECT_EQ(next[0].config, group);
  EXPECT_NE(next[1].config, def) << "the default is not run twice, start or not";
  EXPECT_NE(next[1].config, tma_full);
  EXPECT_NE(next[1].config, group);
  SimFarm restarted = h200;  // the store as a restarted coordinator reads it
  auto value = [](const JobSpec& s) { return 100.0 + double(s.config.at("AK_BN")); };
  h200.run(c, 5, value, "nvidia h200");
  restarted.run(c, 5, value, "nvidia h200");
  EXPECT_EQ(h200.order, restarted.order);
  std::set<search::Config> seen;
  for (const auto& [id, j] : h200.jobs) EXPECT_TRUE(seen.insert(j.spec.config).second) << "twice: " << id;

  // 128x256x64 in 4 stages needs more shared memory than the RTX 4090's 99 KiB: passed over there.
  ASSERT_GT(int64_t(spec->cuda_geometry(tma_full, {4096, 4096, 4096}, DType::kBF16).shared_bytes), 99 * 1024);
  d["gpu_models"] = {"NVIDIA GeForce RTX 4090"};
  SimFarm rtx;
  auto on_rtx = rtx.fill(parse(d), 2, "nvidia geforce rtx 4090");
  ASSERT_EQ(on_rtx.size(), 2u);
  EXPECT_EQ(on_rtx[0].config, def);
  EXPECT_EQ(on_rtx[1].config, group);
}

TEST(StudyTest, ABadStartConfigurationIsRefusedNamingTheTunableAndItsValues) {
  auto with_start = [](json start) {
    json d = {
        {"kind", "study"},
        {"backend", "cuda"},
        {"gpu_models", {"NVIDIA H200"}},
        {"targets", {{{"kernel_type", "matmul"}, {"shape", {4096, 4096, 4096}}, {"dtype", "bf16"}, {"start", start}}}}};
    return error_of(d);
  };
  EXPECT_EQ(with_start({{{"AK_WGMMA", 2}, {"AK_BK", 64}}}), "");
  EXPECT_EQ(with_start({{{"AK_NOPE", 1}}}),
            "target matmul: 'start' names 'AK_NOPE', which is not a tunable (AK_BM, AK_BN, AK_BK, AK_WARPS_M, "
            "AK_WARPS_N, AK_STAGES, AK_GROUP_M, AK_WGMMA, AK_MAX_BLOCKS)");
  EXPECT_EQ(with_start({{{"AK_BK", 48}}}), "target matmul: 'start' gives AK_BK = 48; its values are 16, 32, 64");
  EXPECT_EQ(with_start({{{"AK_BK", "64"}}}), "target matmul: 'start' gives AK_BK = \"64\"; its values are 16, 32, 64");
  EXPECT_NE(with_start(json::array({64})).find("each 'start' entry must be an object"), std::string::npos);
  EXPECT_NE(with_start(json::object()).find("'start' must be a list of at most 64"), std::string::npos);
  EXPECT_EQ(with_start(json(std::vector<json>(64, {{"AK_BK", 64}}))), "");
  EXPECT_NE(with_start(json(std::vector<json>(65, {{"AK_BK", 64}}))).find("'start' must be a list of at most 64"),
            std::string::npos);
  // The TMA path's #error for AK_BK = 32, as the starter's cuda_config_error predicts it.
  const std::string bk32 = with_start({{{"AK_WGMMA", 2}}});  // the default AK_BK is 32
  EXPECT_NE(bk32.find("target matmul: 'start' configuration "), std::string::npos) << bk32;
  EXPECT_NE(bk32.find("cannot be built in bf16: AK_WGMMA=2 (TMA) needs AK_BK 64"), std::string::npos) << bk32;
}

// A start configuration some dtype of its target cannot build is left out of that dtype's studies
// (AK_WGMMA=2 is for fp16/bf16), not a refusal of the campaign; the dtype's defaults complete it only
// where they suit what it gives (flash_attention's bf16 AK_WGMMA=1 needs 16 query rows a warp, so
// {AK_WARPS = 4}, 32 rows a warp at the default 128, keeps the mma.sync path).
TEST(StudyTest, AStartConfigurationGoesToTheDtypesThatCanBuildItWithDefaultsThatSuitIt) {
  json d = {{"kind", "study"},
            {"backend", "cuda"},
            {"gpu_models", {"NVIDIA H200"}},
            {"targets",
             {{{"kernel_type", "matmul"}, {"shape", {4096, 4096, 4096}}, {"start", {{{"AK_WGMMA", 2}, {"AK_BK", 64}}}}},
              {{"kernel_type", "flash_attention"},
               {"shape", {2, 32, 2048, 128}},
               {"dtype", "bf16"},
               {"start", {{{"AK_WARPS", 4}}, {{"AK_BLOCK_N", 128}}}}}}}};
  StudyCampaign c = parse(d);
  ASSERT_EQ(c.studies.size(), 4u);  // matmul in fp32, fp16, bf16; flash in bf16
  for (const StudyDef& s : c.studies) {
    if (s.kernel_type != "matmul") continue;
    if (s.dtype == DType::kF32) {
      EXPECT_TRUE(s.start.empty()) << s.label;
    } else {
      ASSERT_EQ(s.start.size(), 1u) << s.label;
      EXPECT_EQ(s.start[0].at("AK_WGMMA"), 2);
    }
  }
  const StudyDef& flash = c.studies[3];
  ASSERT_EQ(flash.start.size(), 2u);
  EXPECT_EQ(flash.start[0].at("AK_WARPS"), 4);
  EXPECT_EQ(flash.start[0].at("AK_WGMMA"), 0) << "bf16's AK_WGMMA=1 needs 16 rows a warp; 128 rows on 4 warps are 32";
  EXPECT_EQ(flash.start[1].at("AK_WGMMA"), 1) << "where bf16's default suits the tile, it stays";
  // Built in none of its dtypes: refused.
  d["targets"][0]["dtype"] = "fp32";
  EXPECT_NE(error_of(d).find("cannot be built in fp32: AK_WGMMA=1 is for fp16/bf16"), std::string::npos) << error_of(d);
}

}  // namespace
}  // namespace ak
