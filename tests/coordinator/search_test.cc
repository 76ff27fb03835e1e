// Behaviour of the search strategies (coordinator/search/strategy.h) on synthetic objectives.
#include "coordinator/search/strategy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace ak::search {
namespace {

using kernels::Tunable;

// matmul's cuda space (kernels/matmul/spec.cc) without AK_GROUP_M: 3*3*3*3*3*4 = 972 points.
std::vector<Tunable> matmul_space() {
  return {
      {"AK_BM", {64, 128, 256}, 128},  {"AK_BN", {64, 128, 256}, 128}, {"AK_BK", {16, 32, 64}, 32},
      {"AK_WARPS_M", {1, 2, 4}, 2},    {"AK_WARPS_N", {1, 2, 4}, 2},  {"AK_STAGES", {2, 3, 4, 5}, 4},
  };
}

// What an RTX 4090 could launch: fp16 stages of A and B tiles within 99 KiB of shared memory per
// block, and at most 256 fp32 accumulators per thread (the register file's limit).
bool matmul_feasible(const Config& c) {
  const int64_t bm = c.at("AK_BM"), bn = c.at("AK_BN"), bk = c.at("AK_BK");
  const int64_t threads = 32 * c.at("AK_WARPS_M") * c.at("AK_WARPS_N");
  const int64_t smem_bytes = c.at("AK_STAGES") * (bm + bn) * bk * 2;
  return smem_bytes <= 99 * 1024 && bm * bn / threads <= 256;
}

uint64_t config_hash(const Config& c) {
  uint64_t h = 1469598103934665603ull;
  for (const auto& [k, v] : c) {
    for (char ch : k) h = (h ^ uint64_t(uint8_t(ch))) * 1099511628211ull;
    h = (h ^ uint64_t(v)) * 1099511628211ull;
  }
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 32);
}

// A latency model [ms] shaped like a tiled matmul's: a bowl per tunable in log2 of its value,
// interactions (the warp tile BM/WARPS_M x BN/WARPS_N wants to be 128 wide; deep pipelines pay
// off only with a short BK), a second basin of tall 256 x 64 tiles on four warps along M (a local
// optimum 6% above the best) and 3% of deterministic pseudo-noise. Only 3 of the 628 feasible
// points are within 3% of the best (1.1408 ms). About one configuration in 31 fails to compile
// (value nullopt).
std::optional<double> matmul_latency(const Config& c) {
  const uint64_t h = config_hash(c);
  if (h % 31 == 0) return std::nullopt;
  auto lg = [&](const char* n) { return std::log2(double(c.at(n))); };
  const double bm = lg("AK_BM") - 6, bn = lg("AK_BN") - 6, bk = lg("AK_BK") - 4;
  const double wm = lg("AK_WARPS_M"), wn = lg("AK_WARPS_N"), st = double(c.at("AK_STAGES") - 2);
  double t = 1.0;
  t += 0.10 * (bm - 1.3) * (bm - 1.3) + 0.10 * (bn - 1.0) * (bn - 1.0) + 0.08 * (bk - 1.2) * (bk - 1.2);
  t += 0.12 * (bm - wm - 1.0) * (bm - wm - 1.0) + 0.12 * (bn - wn - 1.0) * (bn - wn - 1.0);
  t += 0.05 * (st - (2.5 - 0.8 * bk)) * (st - (2.5 - 0.8 * bk));
  if (bm == 2 && bn == 0 && wm == 2 && wn == 0 && st >= 1) t -= 0.20;
  t += 0.03 * double(h % 1024) / 1024.0;
  return t;
}

std::vector<Config> feasible_points(const std::vector<Tunable>& space) {
  // Reference enumeration, written independently of the library: odometer, last tunable fastest.
  std::vector<Config> out;
  std::vector<size_t> idx(space.size(), 0);
  while (true) {
    Config c;
    for (size_t i = 0; i < space.size(); ++i) c[space[i].name] = space[i].values[idx[i]];
    if (matmul_feasible(c)) out.push_back(c);
    size_t i = space.size();
    while (i > 0 && ++idx[i - 1] == space[i - 1].values.size()) idx[--i] = 0;
    if (i == 0) return out;
  }
}

std::unique_ptr<Strategy> make(const std::string& name, uint64_t seed, const std::vector<Tunable>& space,
                               StrategyOptions opts = {}) {
  auto r = make_strategy(name, space, seed, opts);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return std::move(r).value();
}

StrategyOptions matmul_options() {
  StrategyOptions o;
  o.feasible = matmul_feasible;
  return o;
}

// ---- construction

TEST(SearchStrategyTest, MakeStrategyRejectsAnUnknownNameAndListsTheKnownOnes) {
  auto r = make_strategy("annealing", matmul_space(), 1, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("annealing"), std::string::npos);
  for (const std::string& n : strategy_names()) EXPECT_NE(r.status().message().find(n), std::string::npos) << n;
}

TEST(SearchStrategyTest, EveryKnownNameMakesAStrategyOfThatName) {
  for (const std::string& n : strategy_names()) {
    auto r = make_strategy(n, matmul_space(), 1, {});
    ASSERT_TRUE(r.ok()) << n << ": " << r.status().message();
    EXPECT_EQ((*r)->name(), n);
  }
}

TEST(SearchStrategyTest, MakeStrategyRejectsATunableWithoutValuesOrRepeated) {
  EXPECT_FALSE(make_strategy("random", {{"A", {}, 0}}, 1, {}).ok());
  EXPECT_FALSE(make_strategy("random", {{"A", {1, 2}, 1}, {"A", {3}, 3}}, 1, {}).ok());
  auto r = make_strategy("random", {{"A", {1, 2, 1}, 1}}, 1, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'A'"), std::string::npos);
}

TEST(SearchStrategyTest, MakeStrategyRejectsOptionsOutOfRange) {
  StrategyOptions o;
  o.gamma = 1.0;
  EXPECT_FALSE(make_strategy("tpe", matmul_space(), 1, o).ok());
  o = {};
  o.mutation_neighbour_probability = 0.8;
  o.mutation_random_probability = 0.3;
  EXPECT_FALSE(make_strategy("evolutionary", matmul_space(), 1, o).ok());
  o = {};
  o.startup_trials = 0;
  EXPECT_FALSE(make_strategy("tpe", matmul_space(), 1, o).ok());
}

// ---- proposals

TEST(SearchStrategyTest, ExhaustiveFollowsEnumerationOrderAndSkipsSeenPoints) {
  const std::vector<Tunable> space = {{"A", {1, 2}, 1}, {"B", {10, 20, 30}, 10}};
  auto s = make("exhaustive", 1, space);
  std::vector<Trial> history = {{{{"A", 1}, {"B", 20}}, 3.0}, {{{"A", 2}, {"B", 10}}, std::nullopt}};
  EXPECT_EQ(s->propose(3, history),
            (std::vector<Config>{{{"A", 1}, {"B", 10}}, {{"A", 1}, {"B", 30}}, {{"A", 2}, {"B", 20}}}));
  EXPECT_EQ(s->propose(10, history).size(), 4u);
  EXPECT_TRUE(s->propose(0, history).empty());
}

// Asks each strategy for batches of `batch` until it has nothing left, checking every batch.
void check_exhausts(const std::string& name, size_t batch) {
  SCOPED_TRACE(name + " batch " + std::to_string(batch));
  const std::vector<Tunable> space = matmul_space();
  const std::vector<Config> feasible = feasible_points(space);
  auto s = make(name, 7, space, matmul_options());
  std::vector<Trial> history;
  std::set<Config> seen;
  while (true) {
    std::vector<Config> p = s->propose(batch, history);
    if (p.empty()) break;
    ASSERT_LE(p.size(), batch);
    // Fewer than asked only when nothing is left.
    if (p.size() < batch) {
      EXPECT_EQ(seen.size() + p.size(), feasible.size());
    }
    for (const Config& c : p) {
      ASSERT_EQ(c.size(), space.size());
      ASSERT_TRUE(matmul_feasible(c));
      ASSERT_TRUE(seen.insert(c).second) << "proposed twice or seen";
      history.push_back({c, matmul_latency(c)});  // failures included: seen, never proposed again
    }
  }
  EXPECT_EQ(seen, std::set<Config>(feasible.begin(), feasible.end()));
  EXPECT_TRUE(s->propose(4, history).empty());
}

TEST(SearchStrategyTest, EveryStrategyProposesOnlyNewDistinctFeasibleConfigsUntilTheFeasibleSpaceIsExhausted) {
  ASSERT_EQ(feasible_points(matmul_space()).size(), 628u);  // of 972: the constraints bite
  for (const std::string& name : strategy_names()) {
    check_exhausts(name, 4);
    check_exhausts(name, 13);
  }
}

TEST(SearchStrategyTest, AskingForMoreThanIsLeftReturnsExactlyWhatIsLeft) {
  const std::vector<Config> feasible = feasible_points(matmul_space());
  std::vector<Trial> history;
  for (size_t i = 0; i + 5 < feasible.size(); ++i) history.push_back({feasible[i], matmul_latency(feasible[i])});
  const std::set<Config> left(feasible.end() - 5, feasible.end());
  for (const std::string& name : strategy_names()) {
    auto p = make(name, 3, matmul_space(), matmul_options())->propose(100, history);
    EXPECT_EQ(std::set<Config>(p.begin(), p.end()), left) << name;
    EXPECT_EQ(p.size(), 5u) << name;
  }
}

TEST(SearchStrategyTest, ProposalsAreDeterministicForTheSameSeedAndHistory) {
  const std::vector<Config> feasible = feasible_points(matmul_space());
  for (const std::string& name : strategy_names()) {
    for (size_t len : {size_t{0}, size_t{5}, size_t{40}, size_t{300}}) {
      std::vector<Trial> history;
      for (size_t i = 0; i < len; ++i) {
        const Config& c = feasible[(i * 97) % feasible.size()];
        history.push_back({c, matmul_latency(c)});
      }
      // A restarted coordinator: a new strategy object replaying the same history.
      auto a = make(name, 42, matmul_space(), matmul_options());
      auto b = make(name, 42, matmul_space(), matmul_options());
      const std::vector<Config> first = a->propose(8, history);
      EXPECT_EQ(first.size(), 8u);
      EXPECT_EQ(first, b->propose(8, history)) << name << " history " << len;
      EXPECT_EQ(first, a->propose(8, history)) << name << " history " << len;
      if (name != "exhaustive") {
        EXPECT_NE(first, make(name, 43, matmul_space(), matmul_options())->propose(8, history)) << name;
      }
    }
  }
}

TEST(SearchStrategyTest, RandomIsUniformOverTheUnseenPoints) {
  const std::vector<Tunable> space = {{"A", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 0}};
  std::vector<Trial> history;
  for (int64_t a = 0; a < 5; ++a) history.push_back({{{"A", a}}, 1.0});
  StrategyOptions exact, rejection;
  rejection.exact_random_limit = 0;  // draw per tunable and reject seen points
  for (const StrategyOptions& o : {exact, rejection}) {
    std::map<int64_t, int> count;
    for (uint64_t seed = 0; seed < 2000; ++seed)
      for (const Config& c : make("random", seed, space, o)->propose(1, history)) ++count[c.at("A")];
    ASSERT_EQ(count.size(), 5u);
    for (const auto& [a, n] : count) {
      EXPECT_GE(a, 5);
      EXPECT_NEAR(n, 400, 80) << "A=" << a;  // binomial(2000, 0.2): sd 18
    }
  }
}

TEST(SearchStrategyTest, AHistoryConfigLackingATunableIsReadWithItsDefault) {
  const std::vector<Tunable> space = {{"A", {1, 2}, 2}, {"B", {10, 20}, 10}};
  // {B: 20} is {A: 2, B: 20}; the unknown key X is ignored; {A: 3} is outside the space.
  std::vector<Trial> history = {{{{"B", 20}}, 1.0}, {{{"A", 1}, {"B", 10}, {"X", 5}}, 2.0}, {{{"A", 3}}, 0.5}};
  for (const std::string& name : strategy_names()) {
    auto p = make(name, 1, space)->propose(4, history);
    EXPECT_EQ(std::set<Config>(p.begin(), p.end()),
              (std::set<Config>{{{"A", 1}, {"B", 20}}, {{"A", 2}, {"B", 10}}}))
        << name;
  }
}

TEST(SearchStrategyTest, ASpaceWithoutTunablesHasOnePoint) {
  for (const std::string& name : strategy_names()) {
    auto s = make(name, 1, {});
    EXPECT_EQ(s->propose(3, {}), std::vector<Config>{Config{}}) << name;
    EXPECT_TRUE(s->propose(3, {{Config{}, 1.0}}).empty()) << name;
  }
}

TEST(SearchStrategyTest, StrategiesWorkOnSpacesTooLargeToEnumerate) {
  // 10^24 points: more than 2^64, so random sampling rejects instead of listing.
  std::vector<Tunable> space;
  for (int i = 0; i < 24; ++i) space.push_back({"T" + std::to_string(i), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 0});
  for (const std::string& name : strategy_names()) {
    auto s = make(name, 5, space);
    std::vector<Trial> history;
    std::set<Config> seen;
    for (int round = 0; round < 10; ++round) {
      for (const Config& c : s->propose(8, history)) {
        EXPECT_TRUE(seen.insert(c).second) << name;
        double v = 0;
        for (const auto& [k, x] : c) v += double((x - 4) * (x - 4));
        history.push_back({c, v});
      }
    }
    EXPECT_EQ(seen.size(), 80u) << name;
  }
}

TEST(SearchStrategyTest, FailedTrialsAreNeverParentsNorGoodTrials) {
  // Successes sit at A in {0, 1}, with unseen neighbours; failures fill A = 9. A strategy that
  // took a failure as a parent or as good would propose around A = 9; one that does not stays
  // near A = 0..1.
  const std::vector<Tunable> space = {{"A", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 0},
                                      {"B", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 0}};
  std::vector<Trial> history;
  for (int64_t b = 0; b < 10; ++b) history.push_back({{{"A", 9}, {"B", b}}, std::nullopt});
  const std::vector<std::pair<int64_t, int64_t>> successes = {{0, 0}, {0, 2}, {1, 4}, {0, 6},
                                                               {1, 8}, {1, 1}, {0, 9}, {1, 6}};
  for (size_t i = 0; i < successes.size(); ++i)
    history.push_back({{{"A", successes[i].first}, {"B", successes[i].second}}, 1.0 + 0.1 * double(i)});
  StrategyOptions o;
  o.mutation_random_probability = 0;  // evolutionary: children only move to neighbours
  o.prior_weight = 0.01;              // tpe: unexplored values have next to no density
  for (const std::string& name : {std::string("evolutionary"), std::string("tpe")}) {
    size_t near = 0, proposed = 0;
    for (uint64_t seed = 0; seed < 5; ++seed) {
      for (const Config& c : make(name, seed, space, o)->propose(4, history)) {
        ++proposed;
        if (c.at("A") <= 3) ++near;
      }
    }
    EXPECT_EQ(proposed, 20u) << name;
    // Evolutionary children are neighbours of successes, always. TPE proposes an unexplored value
    // whenever one is among its candidates (there l/g is (bad + prior) / (good + prior) > 1,
    // the estimator's exploration), which the small prior makes rare.
    EXPECT_GE(near, name == "tpe" ? 18u : 20u) << name;
  }
}

// ---- convergence

struct StudyRun {
  size_t evaluations_to_target = 0;  // 0: never reached
  size_t evaluations = 0;
};

// Batches of 4 parallel proposals, each evaluated and appended, until the best is within
// `tolerance` of `target` or `limit` evaluations ran.
StudyRun simulate(const Strategy& s, double target, double tolerance, size_t limit) {
  std::vector<Trial> history;
  StudyRun run;
  while (history.size() < limit) {
    std::vector<Config> batch = s.propose(4, history);
    if (batch.empty()) break;
    for (const Config& c : batch) {
      history.push_back({c, matmul_latency(c)});
      if (!run.evaluations_to_target && history.back().value && *history.back().value <= target * (1 + tolerance))
        run.evaluations_to_target = history.size();
    }
    if (run.evaluations_to_target) break;
  }
  run.evaluations = history.size();
  return run;
}

// The requirement: averaged over 5 seeds, evolutionary and tpe come within 3% of the
// exhaustive best using at most 25% of the feasible evaluations (157 of 628), with proposals in
// batches of 4. Random is the baseline, reported but not asserted. Measured (evaluations, failed
// ones included, until the first result within 3%; seeds 1..5, default StrategyOptions):
//   evolutionary  64 79 18 14 32       mean 41.4  (6.6% of feasible; with its local search)
//   tpe           32 34 28 29 33       mean 31.2  (5.0%)
//   random        106 179 96 192 120   mean 138.6 (22.1%)
// Over seeds 1..50, before the local search: evolutionary mean 34.8, worst 85; tpe mean 37.1,
// worst 71; random mean 153.1, worst 328, over the 157 budget in 25 of 50 (3 target points in 628:
// expected about 157).
TEST(SearchStrategyTest, EvolutionaryAndTpeComeWithinThreePercentOfTheBestInAQuarterOfTheFeasibleEvaluations) {
  const std::vector<Config> feasible = feasible_points(matmul_space());
  double best = 1e300;
  for (const Config& c : feasible)
    if (auto v = matmul_latency(c)) best = std::min(best, *v);
  size_t within = 0;
  for (const Config& c : feasible)
    if (auto v = matmul_latency(c); v && *v <= best * 1.03) ++within;
  const size_t budget = feasible.size() / 4;
  std::printf("feasible %zu, best %.4f, within 3%%: %zu, budget %zu\n", feasible.size(), best, within, budget);

  for (const std::string& name : {std::string("evolutionary"), std::string("tpe"), std::string("random")}) {
    double sum = 0;
    std::string line;
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      const StudyRun r = simulate(*make(name, seed, matmul_space(), matmul_options()), best, 0.03, feasible.size());
      ASSERT_NE(r.evaluations_to_target, 0u) << name << " seed " << seed << " never came within 3%";
      sum += double(r.evaluations_to_target);
      line += " " + std::to_string(r.evaluations_to_target);
    }
    const double mean = sum / 5;
    std::printf("%-13s evaluations to within 3%%:%s (mean %.1f = %.1f%% of feasible)\n", name.c_str(), line.c_str(),
                mean, 100 * mean / double(feasible.size()));
    if (name != "random") {
      EXPECT_LE(mean, double(budget)) << name;
    }
  }
}

// ---- plateau

std::vector<Trial> trials(const std::vector<std::optional<double>>& values) {
  std::vector<Trial> out;
  for (size_t i = 0; i < values.size(); ++i) out.push_back({{{"A", int64_t(i)}}, values[i]});
  return out;
}

TEST(SearchPlateauTest, ABestThatImprovedByLessThanTheThresholdOverTheWindowHasPlateaued) {
  // best 10.0 before the window; 9.95 inside it: 0.5% < 1%
  EXPECT_TRUE(plateaued(trials({12, 10, 11, 9.95, 13, 10.5}), 4, 0.01));
}

TEST(SearchPlateauTest, ABestThatImprovedByTheThresholdOrMoreHasNotPlateaued) {
  EXPECT_FALSE(plateaued(trials({120, 100, 110, 99, 130, 105}), 4, 0.01));  // exactly 1%
  EXPECT_FALSE(plateaued(trials({12, 10, 11, 13, 10.5, 8.0}), 4, 0.01));  // 20%, last trial
}

TEST(SearchPlateauTest, AWindowWithoutImprovementOrOnlyFailuresHasPlateaued) {
  EXPECT_TRUE(plateaued(trials({10, 9, 11, 12, 9.5}), 3, 0.01));
  EXPECT_TRUE(plateaued(trials({10, 9, std::nullopt, std::nullopt, std::nullopt}), 3, 0.01));
}

TEST(SearchPlateauTest, TooShortAHistoryHasNotPlateaued) {
  EXPECT_FALSE(plateaued(trials({10, 10, 10}), 3, 0.01));
  EXPECT_FALSE(plateaued({}, 3, 0.01));
  EXPECT_FALSE(plateaued(trials({10, 10, 10}), 0, 0.01));
  EXPECT_TRUE(plateaued(trials({10, 10, 10, 10}), 3, 0.01));
}

TEST(SearchPlateauTest, TheFirstSuccessInTheWindowIsProgressAndNoSuccessAtAllIsNot) {
  EXPECT_FALSE(plateaued(trials({std::nullopt, std::nullopt, 5.0, std::nullopt}), 2, 0.01));
  EXPECT_TRUE(plateaued(trials({std::nullopt, std::nullopt, std::nullopt, std::nullopt}), 2, 0.01));
}

}  // namespace
}  // namespace ak::search
