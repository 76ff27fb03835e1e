// Behaviour of the campaign's capacity allocation (coordinator/search/allocation.h): the Amdahl
// estimate, gain-proportional slots, exploration, stop rules, and a simulated campaign over a
// fake clock.
#include "coordinator/search/allocation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "common/clock.h"

namespace ak::search {
namespace {

Target make_target(double share, double baseline_us, std::optional<double> best_us, double roofline_us,
                   size_t trials = 10, size_t budget = 1000) {
  Target t;
  t.share = share;
  t.baseline_us = baseline_us;
  t.best_us = best_us;
  t.roofline_us = roofline_us;
  t.trials = trials;
  t.budget_trials = budget;
  return t;
}

size_t total(const std::vector<size_t>& v) { return std::accumulate(v.begin(), v.end(), size_t{0}); }

// --- speedup and the Amdahl estimate ---

TEST(AllocationTest, SpeedupIsOneWithoutAResultAndReportsSlowdownsRaw) {
  EXPECT_DOUBLE_EQ(speedup(make_target(0.5, 100, std::nullopt, 10)), 1.0);
  EXPECT_DOUBLE_EQ(speedup(make_target(0.5, 100, 50.0, 10)), 2.0);
  EXPECT_DOUBLE_EQ(speedup(make_target(0.5, 80, 100.0, 10)), 0.8);
  EXPECT_DOUBLE_EQ(effective_speedup(make_target(0.5, 80, 100.0, 10)), 1.0);
}

TEST(AllocationTest, AmdahlEstimateMatchesAHandComputationWithASlowKernelCountedAsOne) {
  // s = 2, 1.5, 0.8 -> s_eff = 2, 1.5, 1: 1 / (1 - (0.5 * 1/2 + 0.3 * 1/3 + 0.1 * 0)) = 1 / 0.65.
  const std::vector<Target> ts = {make_target(0.5, 100, 50.0, 10), make_target(0.3, 150, 100.0, 10),
                                  make_target(0.1, 80, 100.0, 10)};
  EXPECT_NEAR(amdahl_estimate(ts), 1.0 / 0.65, 1e-12);
  EXPECT_NEAR(amdahl_estimate(ts), 1.538461538, 1e-9);
}

TEST(AllocationTest, AmdahlEstimateOfNoTargetsIsOne) { EXPECT_DOUBLE_EQ(amdahl_estimate({}), 1.0); }

TEST(AllocationTest, AmdahlEstimateGuardsAWholeWorkloadWithInfiniteSpeedup) {
  const std::vector<Target> ts = {make_target(0.5, 100, 0.0, 0), make_target(0.5, 100, 0.0, 0)};
  EXPECT_TRUE(std::isinf(speedup(ts[0])));
  const double e = amdahl_estimate(ts);
  EXPECT_FALSE(std::isnan(e));
  EXPECT_TRUE(std::isinf(e) && e > 0);
  // Half the workload infinitely fast: the other half bounds the speedup at 2.
  EXPECT_NEAR(amdahl_estimate({make_target(0.5, 100, 0.0, 0), make_target(0.5, 100, 100.0, 0)}), 2.0, 1e-12);
}

// --- validation ---

TEST(AllocationTest, AllocateRejectsSharesSummingAboveOneAndBadTimes) {
  auto r = allocate({make_target(0.7, 100, 50.0, 10), make_target(0.4, 100, 50.0, 10)}, 4);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("sum to"), std::string::npos);

  Target bad = make_target(0.5, 0.0, std::nullopt, 10);
  bad.name = "matmul 4096 fp16";
  r = allocate({bad}, 4);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("matmul 4096 fp16"), std::string::npos);

  EXPECT_FALSE(allocate({make_target(0.5, 100, -1.0, 10)}, 4).ok());
  EXPECT_FALSE(allocate({make_target(0.5, 100, 50.0, -1)}, 4).ok());
  EXPECT_FALSE(allocate({make_target(1.5, 100, 50.0, 10)}, 4).ok());
  AllocationOptions opts;
  opts.staleness_tau_trials = 0;
  EXPECT_FALSE(allocate({make_target(0.5, 100, 50.0, 10)}, 4, opts).ok());
}

// --- capacity follows the expected gain ---

TEST(AllocationTest, CapacityFollowsExpectedGainWithLargestRemainderRounding) {
  // potentials f * (best - roofline) / baseline:
  //   big share, far from roofline:   0.5 * (50 - 10) / 100 = 0.2
  //   small share, far from roofline: 0.2 * (50 - 10) / 100 = 0.08
  //   big share, near its roofline:   0.3 * (15 - 10) / 100 = 0.015
  // 20 slots: quotas 20 * g / 0.295 = 13.56, 5.42, 1.02 -> floors 13, 5, 1 (19); the one left
  // goes to the largest fraction (0.56): 14, 5, 1.
  const std::vector<Target> ts = {make_target(0.5, 100, 50.0, 10), make_target(0.2, 100, 50.0, 10),
                                  make_target(0.3, 100, 15.0, 10)};
  auto r = allocate(ts, 20);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NEAR(r->gain[0], 0.2, 1e-12);
  EXPECT_NEAR(r->gain[1], 0.08, 1e-12);
  EXPECT_NEAR(r->gain[2], 0.015, 1e-12);
  EXPECT_EQ(r->slots, (std::vector<size_t>{14, 5, 1}));
  EXPECT_EQ(r->unused_slots, 0u);
}

TEST(AllocationTest, StaleStudiesFadeByTheDecay) {
  // Same potential 0.2; the second has gone 8 trials (= tau) without improving: 0.2 / e = 0.0736.
  // 10 slots: quotas 7.31, 2.69 -> 7, 2 and the last to the larger fraction (0.69): 7, 3.
  std::vector<Target> ts = {make_target(0.5, 100, 50.0, 10), make_target(0.5, 100, 50.0, 10)};
  ts[1].trials_since_improvement = 8;
  auto r = allocate(ts, 10);
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->gain[1], 0.2 * std::exp(-1.0), 1e-12);
  EXPECT_EQ(r->slots, (std::vector<size_t>{7, 3}));
}

TEST(AllocationTest, EqualGainsBreakTiesByLowerIndex) {
  const std::vector<Target> ts = {make_target(0.3, 100, 50.0, 10), make_target(0.3, 100, 50.0, 10),
                                  make_target(0.3, 100, 50.0, 10)};
  auto r = allocate(ts, 5);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->slots, (std::vector<size_t>{2, 2, 1}));
}

TEST(AllocationTest, NoTargetGetsMoreThanItsRemainingBudgetAndTheExcessGoesToTheOthers) {
  // Gains 0.2, 0.08, 0.08: the first's quota (10 * 0.2 / 0.36 = 5.6) exceeds its 2 remaining trials
  // (10 budget - 7 done - 1 in flight); the other 8 slots split evenly.
  std::vector<Target> ts = {make_target(0.5, 100, 50.0, 10, 7, 10), make_target(0.2, 100, 50.0, 10),
                            make_target(0.2, 100, 50.0, 10)};
  ts[0].in_flight = 1;
  auto r = allocate(ts, 10);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->slots, (std::vector<size_t>{2, 4, 4}));
}

TEST(AllocationTest, SlotsNobodyCanTakeAreReportedUnused) {
  const std::vector<Target> ts = {make_target(0.5, 100, 50.0, 10, 8, 10), make_target(0.5, 100, 50.0, 10, 9, 10)};
  auto r = allocate(ts, 10);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->slots, (std::vector<size_t>{2, 1}));
  EXPECT_EQ(r->unused_slots, 7u);
}

// --- done and plateaued studies ---

TEST(AllocationTest, ADoneStudyStopsReceivingWorkAndItsSlotsGoToTheOthers) {
  std::vector<Target> ts = {make_target(0.5, 100, 50.0, 10), make_target(0.2, 100, 50.0, 10),
                            make_target(0.2, 100, 50.0, 10)};
  auto before = allocate(ts, 9);
  ASSERT_TRUE(before.ok());
  EXPECT_GT(before->slots[0], before->slots[1]);

  ts[0].done = true;
  auto after = allocate(ts, 9);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->slots[0], 0u);
  EXPECT_DOUBLE_EQ(after->gain[0], 0.0);
  EXPECT_EQ(total(after->slots), 9u);
  EXPECT_GT(after->slots[1], before->slots[1]);
}

TEST(AllocationTest, APlateauedStudyIsStoppedAndThenGetsNothing) {
  StopRule rule;
  rule.plateau_window = 12;
  std::vector<Target> ts = {make_target(0.5, 100, 50.0, 10), make_target(0.3, 100, 50.0, 10)};
  ts[0].trials_since_improvement = 12;
  EXPECT_EQ(stop_reason(ts[0], rule, 0), StopReason::kPlateau);
  EXPECT_FALSE(should_stop(ts[1], rule, 0));
  ts[0].done = should_stop(ts[0], rule, 0);
  auto r = allocate(ts, 6);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->slots, (std::vector<size_t>{0, 6}));
}

// --- exploration ---

TEST(AllocationTest, ATargetWithNoResultYetIsMeasuredFirst) {
  // The measured target's gain (0.5 * 0.9 = 0.45) dwarfs the new one's (0.05 * 0.5 = 0.025); with a
  // single free slot the new target still gets it.
  const std::vector<Target> ts = {make_target(0.5, 100, 100.0, 10), make_target(0.05, 100, std::nullopt, 50, 0)};
  auto r = allocate(ts, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->slots, (std::vector<size_t>{0, 1}));
}

TEST(AllocationTest, WithFewerSlotsThanNewTargetsLargerSharesAreMeasuredFirst) {
  const std::vector<Target> ts = {make_target(0.1, 100, std::nullopt, 10, 0), make_target(0.4, 100, std::nullopt, 10, 0),
                                  make_target(0.4, 100, std::nullopt, 10, 0)};
  auto r = allocate(ts, 2);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->slots, (std::vector<size_t>{0, 1, 1}));
}

TEST(AllocationTest, ATargetWhoseFirstTrialIsInFlightGetsNoExplorationSlot) {
  std::vector<Target> ts = {make_target(0.5, 100, 100.0, 10), make_target(0.05, 100, std::nullopt, 50, 0)};
  ts[1].in_flight = 1;
  auto r = allocate(ts, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->slots, (std::vector<size_t>{1, 0}));
}

// --- stop rules ---

TEST(AllocationTest, StopRulesFireForRooflineBudgetAndWallTime) {
  StopRule rule;
  rule.roofline_fraction = 0.9;
  rule.wall_budget_ms = 60'000;
  Target t = make_target(0.5, 100, 20.0, 17.0, 10, 100);  // 17 / 20 = 0.85
  t.started_ms = 1'000'000;
  EXPECT_EQ(stop_reason(t, rule, 1'000'000), StopReason::kNone);
  t.best_us = 18.0;  // 17 / 18 = 0.944
  EXPECT_EQ(stop_reason(t, rule, 1'000'000), StopReason::kRoofline);
  t.best_us = 20.0;
  t.trials = 100;
  EXPECT_EQ(stop_reason(t, rule, 1'000'000), StopReason::kBudget);
  t.trials = 10;
  EXPECT_EQ(stop_reason(t, rule, 1'059'999), StopReason::kNone);
  EXPECT_EQ(stop_reason(t, rule, 1'060'000), StopReason::kWallTime);
  EXPECT_STREQ(stop_reason_name(StopReason::kWallTime), "WALL_TIME");
  rule.wall_budget_ms = 0;
  EXPECT_FALSE(should_stop(t, rule, 1'000'000'000));
}

TEST(AllocationTest, TrialsSinceImprovementCountsFromTheLastOnePercentStep) {
  using H = std::vector<Trial>;
  EXPECT_EQ(trials_since_improvement(H{}), 0u);
  EXPECT_EQ(trials_since_improvement(H{{{}, std::nullopt}, {{}, std::nullopt}}), 2u);
  EXPECT_EQ(trials_since_improvement(H{{{}, 10.0}, {{}, 11.0}, {{}, std::nullopt}}), 2u);
  // 0.5% then another 0.6% (1.1% in total from 10.0 at the fourth trial): counted there.
  EXPECT_EQ(trials_since_improvement(H{{{}, 10.0}, {{}, 9.95}, {{}, 9.95}, {{}, 9.89}, {{}, 9.89}}), 1u);
  EXPECT_EQ(trials_since_improvement(H{{{}, 10.0}, {{}, 9.95}, {{}, 9.92}}), 2u);
}

// --- a simulated campaign over a fake clock ---

// Uniform in [0, 1) from the engine's raw output (portable across standard libraries).
double uniform(std::mt19937_64& rng) { return double(rng() >> 11) * 0x1.0p-53; }

TEST(AllocationTest, SimulatedCampaignFavoursTheLargestShareAndEveryStudyStopsWithinItsBudgets) {
  FakeClock clock;
  constexpr size_t kWorkers = 4;
  constexpr int64_t kTickMs = 1000;  // every trial takes one tick
  StopRule rule;
  rule.plateau_window = 10;
  rule.roofline_fraction = 0.95;
  rule.wall_budget_ms = 30'000;

  // share, baseline, roofline, how fast its true curve closes the gap (per trial). With this seed:
  // target 0 runs 63 trials (44.3 us), target 1 reaches 95% of its roofline in 16, target 2 runs
  // 41 (its gap stays wide, so it keeps some capacity); end-to-end estimate 1.92x.
  struct Truth {
    double share, baseline_us, roofline_us, rate;
  };
  const std::vector<Truth> truth = {{0.6, 100, 40, 0.30}, {0.25, 50, 20, 0.60}, {0.1, 30, 20, 0.05}};
  std::vector<Target> ts;
  std::vector<std::vector<Trial>> history(truth.size());
  for (const Truth& tr : truth) {
    Target t = make_target(tr.share, tr.baseline_us, std::nullopt, tr.roofline_us, 0, 200);
    t.started_ms = clock.now_ms();
    ts.push_back(t);
  }
  std::mt19937_64 rng(20240611);
  std::vector<StopReason> reason(ts.size(), StopReason::kNone);
  std::vector<int64_t> last_dispatch_ms(ts.size(), -1);
  std::vector<int64_t> stopped_ms(ts.size(), -1);

  for (int tick = 0; tick < 1000; ++tick) {
    const int64_t now = clock.now_ms();
    bool all_done = true;
    for (size_t i = 0; i < ts.size(); ++i) {
      if (!ts[i].done && should_stop(ts[i], rule, now)) {
        ts[i].done = true;
        reason[i] = stop_reason(ts[i], rule, now);
        stopped_ms[i] = now;
      }
      all_done = all_done && ts[i].done;
    }
    if (all_done) break;

    auto a = allocate(ts, kWorkers);
    ASSERT_TRUE(a.ok()) << a.status().message();
    for (size_t i = 0; i < ts.size(); ++i) {
      if (a->slots[i] == 0) continue;
      ASSERT_FALSE(ts[i].done);
      ASSERT_LT(now - ts[i].started_ms, rule.wall_budget_ms) << "work dispatched past the wall budget";
      last_dispatch_ms[i] = now;
      for (size_t k = 0; k < a->slots[i]; ++k) {
        // The true curve: each trial closes a random, shrinking part of the gap to the roofline;
        // a third of trials find nothing better, one in 20 fails to compile.
        const Truth& tr = truth[i];
        const double u = uniform(rng);
        const double cur = ts[i].best_us.value_or(tr.baseline_us * 1.2);
        std::optional<double> v;
        if (u < 0.05) {
          v = std::nullopt;
        } else if (u < 0.35) {
          v = cur * (1.0 + u);
        } else {
          const double step = tr.rate * u * std::exp(-double(ts[i].trials) / 20.0);
          v = tr.roofline_us + (cur - tr.roofline_us) * (1.0 - step);
        }
        history[i].push_back({{}, v});
        if (v && (!ts[i].best_us || *v < *ts[i].best_us)) ts[i].best_us = v;
        ++ts[i].trials;
      }
      ts[i].trials_since_improvement = trials_since_improvement(history[i]);
    }
    clock.advance(std::chrono::milliseconds(kTickMs));
  }

  for (size_t i = 0; i < ts.size(); ++i) {
    EXPECT_TRUE(ts[i].done) << "target " << i << " never stopped";
    EXPECT_NE(reason[i], StopReason::kNone);
    EXPECT_LE(ts[i].trials, ts[i].budget_trials);
    EXPECT_LT(last_dispatch_ms[i] - ts[i].started_ms, rule.wall_budget_ms);
    EXPECT_LE(stopped_ms[i] - ts[i].started_ms, rule.wall_budget_ms);
    std::printf("target %zu: share %.2f, %zu trials, best %.2f us (roofline %.0f), stopped: %s\n", i, ts[i].share,
                ts[i].trials, ts[i].best_us.value_or(-1), ts[i].roofline_us, stop_reason_name(reason[i]));
  }
  EXPECT_GT(ts[0].trials, ts[1].trials);
  EXPECT_GT(ts[0].trials, ts[2].trials);
  // The fast-converging target reaches its roofline early; the others run into the wall-time
  // budget, so that rule is exercised, not just present.
  EXPECT_EQ(reason[1], StopReason::kRoofline);
  EXPECT_EQ(std::count(reason.begin(), reason.end(), StopReason::kWallTime), 2);
  EXPECT_GT(amdahl_estimate(ts), 1.0);
  std::printf("end-to-end estimate: %.3fx\n", amdahl_estimate(ts));
}

}  // namespace
}  // namespace ak::search
