// Study campaigns on a real farm of 4 CPU workers (real redis-server, coordinator and worker
// processes; real compiles and timings): the search strategies against a space whose exhaustive
// best is known, and a study that survives a coordinator crash.
//
// The space is tests/integration/data/study_space_cpu.cc: a correct CPU softmax whose latency is
// a designed function of AK_A (0..7), AK_B (0..7) and AK_C (0..3), 256 points, unique best at
// A=5,B=2,C=1 with every other point at least 12% slower. coordinator/study_test.cc simulates the
// same strategies on the same function with timing noise.
#include <cstdio>
#include <set>
#include <string>

#include "tests/integration/data/study_space.h"
#include "tests/integration/farm.h"

namespace ak::testing {
namespace {

using nlohmann::json;
using Config = std::map<std::string, int64_t>;

json designed_study(const std::string& name, const std::string& strategy, int64_t seed, int64_t budget) {
  json doc = testing::designed_study(
      name, strategy, seed, budget, read_text(std::string(AK_SOURCE_DIR) + "/tests/integration/data/study_space_cpu.cc"));
  doc["timeout_ms"] = 60000;
  doc["measure"] = {{"warmup", 3}, {"min_samples", 25}, {"max_samples", 60}, {"max_time_ms", 100}, {"noise_target", 0.002}};
  return doc;
}

struct StudyRows {
  std::map<Config, double> latency;  // by configuration, PASS rows only
  std::map<Config, int> runs;        // jobs per configuration
  size_t jobs = 0, rows = 0, pass = 0;
  // The trial (job id suffix) that proposed the designed best; -1: never proposed.
  int64_t designed_best_trial = -1;
  Config best;
  double best_us = 1e300;
};

StudyRows rows_of(const StoreSnapshot& snap, const std::string& cid) {
  StudyRows s;
  std::map<std::string, Config> config_of;
  for (const auto& j : snap.jobs)
    if (j.spec.campaign_id == cid) {
      config_of[j.spec.job_id] = j.spec.config;
      ++s.runs[j.spec.config];
      ++s.jobs;
      if (j.spec.config == kDesignedBest)
        s.designed_best_trial = std::stoll(j.spec.job_id.substr(j.spec.job_id.rfind('-') + 1));
    }
  for (const auto& r : snap.results) {
    auto it = config_of.find(r.job_id);
    if (it == config_of.end()) continue;
    ++s.rows;
    if (r.status == ResultStatus::kCancelled) continue;  // the cancel test's: measured nothing
    if (r.status != ResultStatus::kPass) {
      ADD_FAILURE() << r.job_id << " " << result_status_name(r.status) << " " << r.stage << ": " << r.reason;
      continue;
    }
    ++s.pass;
    s.latency[it->second] = r.m.latency_us;
    if (r.m.latency_us < s.best_us) {
      s.best_us = r.m.latency_us;
      s.best = it->second;
    }
  }
  return s;
}

// Every job of campaign `cid` has exactly one result row.
void expect_one_row_per_job(const StoreSnapshot& snap, const std::string& cid) {
  std::map<std::string, int> per_job;
  for (const auto& r : snap.results) ++per_job[r.job_id];
  for (const auto& j : snap.jobs)
    if (j.spec.campaign_id == cid) {
      EXPECT_EQ(per_job[j.spec.job_id], 1) << j.spec.job_id;
    }
}

// Exhaustive study of the whole space, then evolutionary and tpe with seeds 1..5 at a budget of
// 64 evaluations (25% of the space). Each strategy run's best configuration is judged by the
// exhaustive study's latency for that configuration.
TEST(StudyFarmTest, EvolutionaryAndTpeComeWithinThreePercentOfTheExhaustiveBestInAQuarterOfTheEvaluations) {
  Farm farm;
  farm.start_coordinator();
  for (int i = 0; i < 4; ++i) farm.start_worker("s" + std::to_string(i), 1);
  farm.wait_workers(4);
  const std::string exhaustive = farm.submit(designed_study("exhaustive", "exhaustive", 1, 256));
  // The strategy runs start once every configuration is compiled (the farm's compile cache is
  // shared): compiles beside a measurement on 2 cores made single measurements up to 12% slow.
  farm.wait_campaign(exhaustive, std::chrono::seconds(1800));
  std::map<std::string, std::string> runs;  // campaign id -> "strategy seed"
  for (const std::string strategy : {"evolutionary", "tpe"})
    for (int64_t seed = 1; seed <= 5; ++seed)
      runs[farm.submit(designed_study(strategy + "-" + std::to_string(seed), strategy, seed, 64))] =
          strategy + " " + std::to_string(seed);
  for (const auto& [cid, what] : runs) farm.wait_campaign(cid, std::chrono::seconds(1200));
  const StoreSnapshot snap = farm.snapshot();

  StudyRows table = rows_of(snap, exhaustive);
  ASSERT_EQ(table.jobs, 256u);
  ASSERT_EQ(table.pass, 256u);
  // One measurement of a job can be 10% high on 2 cores shared by 4 workers and their compiles
  // (seen: 171.9 us for the best point, 153 us in other jobs of the same run), so the table holds,
  // per configuration, the fastest of all its measurements in this run: the exhaustive study's
  // and every strategy run's.
  for (const auto& [cid, what] : runs)
    for (const auto& [config, us] : rows_of(snap, cid).latency)
      if (us < table.latency.at(config)) table.latency[config] = us;
  table.best_us = 1e300;
  for (const auto& [config, us] : table.latency)
    if (us < table.best_us) {
      table.best_us = us;
      table.best = config;
    }
  EXPECT_EQ(table.best, kDesignedBest) << "the exhaustive best is not the designed one: " << config_string(table.best);
  std::printf("exhaustive: best %s at %.1f us (fastest of its measurements)\n", config_string(table.best).c_str(),
              table.best_us);

  std::map<std::string, std::pair<double, int>> gap;  // strategy -> (sum of gaps, runs)
  for (const auto& [cid, what] : runs) {
    const StudyRows r = rows_of(snap, cid);
    EXPECT_EQ(r.jobs, 64u) << what;
    EXPECT_EQ(r.rows, 64u) << what;
    for (const auto& [config, n] : r.runs) EXPECT_EQ(n, 1) << what << " ran " << config_string(config) << " twice";
    ASSERT_TRUE(table.latency.count(r.best)) << what;
    const double g = table.latency.at(r.best) / table.best_us - 1.0;
    const std::string strategy = what.substr(0, what.find(' '));
    gap[strategy].first += g;
    ++gap[strategy].second;
    const std::string proposed =
        r.designed_best_trial < 0 ? "never proposed" : "proposed at trial " + std::to_string(r.designed_best_trial);
    std::printf("%-15s best %s: %.1f us measured, exhaustive table %.1f us (+%.1f%%); designed best %s\n",
                what.c_str(), config_string(r.best).c_str(), r.best_us, table.latency.at(r.best), 100 * g,
                proposed.c_str());
  }
  for (const auto& [strategy, g] : gap) {
    const double mean = g.first / g.second;
    std::printf("%s: mean gap to the exhaustive best over %d seeds %.2f%% with 64 of 256 evaluations\n",
                strategy.c_str(), g.second, 100 * mean);
    // The bar for both strategies. Evolutionary was held to 8% while it was a plain
    // genetic algorithm: runs on a 2-core CI machine gave mean gaps of 0.05% to 3.6%, one or two
    // of five seeds stopping at a neighbour 12% slower. Its local search (coordinator/search/
    // evolutionary.cc) proposes the designed best in every seed of the noisy simulation in
    // coordinator/study_test.cc; what is left is the best measured slower than a neighbour.
    EXPECT_LE(mean, 0.03) << strategy;
  }
}

// A tpe study run to completion, then the same study (same seed) with the coordinator killed
// (SIGKILL) after 20 results and restarted: it resumes from the store, no configuration runs
// twice, the budget is kept, and it ends as well as the uninterrupted run.
//
// "As well as", not "at the same configuration": tpe proposes from measured latencies, so two runs
// with one seed part ways at the first noisy measurement. CI on 2026-12-05 saw the uninterrupted
// run end at AK_A=6,AK_B=3,AK_C=1 (a designed rival 12% slower) while the crashed one found the
// designed best. Each run's best is judged by the designed cost, which no noise moves: both must
// end at the designed best or one of its two rivals at 12%, what a tpe run with 64 of 256
// evaluations reaches under this noise (the strategy's quality over seeds is the test above).
TEST(StudyFarmTest, AStudyResumesAfterACoordinatorCrashWithoutRerunningATrialAndEndsAsWellAsAnUninterruptedRun) {
  Farm farm;
  farm.start_coordinator();
  for (int i = 0; i < 4; ++i) farm.start_worker("t" + std::to_string(i), 1);
  farm.wait_workers(4);
  const std::string plain = farm.submit(designed_study("uninterrupted", "tpe", 11, 64));
  farm.wait_campaign(plain, std::chrono::seconds(900));

  const std::string cid = farm.submit(designed_study("interrupted", "tpe", 11, 64));
  farm.wait_finished(cid, 20, std::chrono::seconds(600));
  farm.kill_coordinator();
  const StudyRows before = rows_of(farm.snapshot(), cid);
  ASSERT_GE(before.rows, 20u);
  ASSERT_LT(before.rows, 64u) << "the study finished before the crash; the test proves nothing";

  farm.start_coordinator();
  farm.wait_campaign(cid, std::chrono::seconds(900));
  const StoreSnapshot snap = farm.snapshot();
  const StudyRows after = rows_of(snap, cid);
  const StudyRows reference = rows_of(snap, plain);
  EXPECT_EQ(after.jobs, 64u);
  EXPECT_EQ(after.rows, 64u);
  for (const auto& [config, n] : after.runs) EXPECT_EQ(n, 1) << config_string(config) << " ran twice";
  for (const auto& [config, us] : before.latency) EXPECT_TRUE(after.latency.count(config)) << config_string(config);
  const double best_cost = designed_cost(kDesignedBest);
  EXPECT_LE(designed_cost(after.best), 1.12 * best_cost) << "crashed run ended at " << config_string(after.best);
  EXPECT_LE(designed_cost(reference.best), 1.12 * best_cost)
      << "uninterrupted run ended at " << config_string(reference.best);
  std::printf("crashed after %zu results; final best %s (%.1f us), uninterrupted %s (%.1f us)\n", before.rows,
              config_string(after.best).c_str(), after.best_us, config_string(reference.best).c_str(),
              reference.best_us);
  expect_one_row_per_job(snap, cid);
}

// A cancelled study proposes nothing more, also after a coordinator restart: its jobs end with what
// was running when the cancel came, and each has one row.
TEST(StudyFarmTest, ACancelledStudyProposesNothingMoreEvenAfterARestart) {
  Farm farm;
  farm.start_coordinator();
  for (int i = 0; i < 2; ++i) farm.start_worker("c" + std::to_string(i), 1);
  farm.wait_workers(2);
  const std::string cid = farm.submit(designed_study("cancelled", "tpe", 3, 64));
  farm.wait_finished(cid, 4, std::chrono::seconds(600));
  auto r = farm.client().cancel(cid, "enough");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const int64_t proposed = r->cancelled + r->stopping + r->finished;
  farm.wait_campaign(cid, std::chrono::seconds(300));
  farm.kill_coordinator();
  farm.start_coordinator();
  const json st = farm.wait_campaign(cid, std::chrono::seconds(300));
  const StoreSnapshot snap = farm.snapshot();
  const StudyRows rows = rows_of(snap, cid);
  EXPECT_EQ(static_cast<int64_t>(rows.jobs), proposed) << "a job was proposed after the cancel";
  EXPECT_LT(rows.jobs, 64u) << "the study finished before the cancel; the test proves nothing";
  expect_one_row_per_job(snap, cid);
  for (const auto& c : st["campaigns"]) {
    if (c["campaign_id"] == cid) {
      EXPECT_EQ(c["cancelled"], true) << c.dump();
    }
  }
}

}  // namespace
}  // namespace ak::testing
