#include "kernelbench/score.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

namespace ak::kernelbench {
namespace {

constexpr char kH200[] = "NVIDIA H200";
constexpr char kH100[] = "NVIDIA H100 80GB HBM3";

Baseline baseline(int level, const std::string& name, double mean_ms, const std::string& mode = "eager",
                  const std::string& gpu = kH200) {
  Baseline b;
  b.level = level;
  b.problem_name = name;
  b.gpu_model = gpu;
  b.mode = mode;
  b.mean_ms = mean_ms;
  return b;
}

SampleEval correct_sample(int level, const std::string& name, double runtime_ms, int sample_id = 0,
                          const std::string& gpu = kH200) {
  SampleEval s;
  s.level = level;
  s.problem_name = name;
  s.sample_id = sample_id;
  s.gpu_model = gpu;
  s.compiled = true;
  s.correct = true;
  s.runtime_ms = runtime_ms;
  return s;
}

SampleEval incorrect_sample(int level, const std::string& name, bool compiled, int sample_id = 0,
                            const std::string& gpu = kH200) {
  SampleEval s;
  s.level = level;
  s.problem_name = name;
  s.sample_id = sample_id;
  s.gpu_model = gpu;
  s.compiled = compiled;
  s.correct = false;
  s.runtime_ms = compiled ? 0.01 : 0;  // a fast but wrong kernel must not count
  return s;
}

// Five problems of level 1 on the H200 against eager:
//   p1: baseline 10 ms, correct in 5 ms   -> speedup 2.0 (not > 2.0: strict at the top)
//   p2: baseline  4 ms, correct in 4 ms   -> speedup 1.0 (not > 1.0: strict at p = 1)
//   p3: baseline  3 ms, correct in 4 ms   -> speedup 0.75
//   p4: baseline  2 ms, compiles, wrong (but "fast")
//   p5: baseline  1 ms, never evaluated
// n = 5, compiled = 4, correct = 3, geo mean = (2 * 1 * 0.75)^(1/3).
struct FiveProblems {
  std::vector<Baseline> baselines = {baseline(1, "p1.py", 10), baseline(1, "p2.py", 4), baseline(1, "p3.py", 3),
                                     baseline(1, "p4.py", 2), baseline(1, "p5.py", 1)};
  std::vector<SampleEval> samples = {correct_sample(1, "p1.py", 5), correct_sample(1, "p2.py", 4),
                                     correct_sample(1, "p3.py", 4), incorrect_sample(1, "p4.py", true)};
};

TEST(Score, FastPDividesByAllProblemsWithABaselineAndIsStrictAtEveryKernelBenchThreshold) {
  FiveProblems f;
  const std::vector<LevelScore> scores = score(f.samples, f.baselines);
  ASSERT_EQ(scores.size(), 1u);
  const LevelScore& s = scores[0];
  EXPECT_EQ(s.level, 1);
  EXPECT_EQ(s.gpu_model, kH200);
  EXPECT_EQ(s.baseline_mode, "eager");
  ASSERT_EQ(s.fast_p.size(), kKernelBenchThresholds.size());
  EXPECT_DOUBLE_EQ(s.fast_p.at(0.0), 3.0 / 5);
  EXPECT_DOUBLE_EQ(s.fast_p.at(0.5), 3.0 / 5);
  EXPECT_DOUBLE_EQ(s.fast_p.at(0.8), 2.0 / 5);
  EXPECT_DOUBLE_EQ(s.fast_p.at(1.0), 1.0 / 5);  // p2's equal speed does not count
  EXPECT_DOUBLE_EQ(s.fast_p.at(1.5), 1.0 / 5);
  EXPECT_DOUBLE_EQ(s.fast_p.at(2.0), 0.0);  // p1's exactly 2x does not count
}

TEST(Score, AProblemWithABaselineButNoEvaluationCountsAsNeitherCompiledNorCorrect) {
  FiveProblems f;
  const LevelScore s = score(f.samples, f.baselines).at(0);
  EXPECT_EQ(s.problems, 5);
  EXPECT_EQ(s.compiled, 4);
  EXPECT_EQ(s.correct, 3);
  EXPECT_DOUBLE_EQ(s.compilation_rate, 4.0 / 5);
  EXPECT_DOUBLE_EQ(s.correctness_rate, 3.0 / 5);
}

TEST(Score, GeoMeanSpeedupIsTakenOverCorrectProblemsOnly) {
  FiveProblems f;
  const LevelScore s = score(f.samples, f.baselines).at(0);
  EXPECT_DOUBLE_EQ(s.geo_mean_speedup, std::cbrt(2.0 * 1.0 * 0.75));
  EXPECT_NEAR(s.geo_mean_speedup, 1.1447142425533319, 1e-12);
}

TEST(Score, EvaluationsOfProblemsWithoutABaselineAreIgnored) {
  FiveProblems f;
  f.samples.push_back(correct_sample(1, "p6.py", 0.001));  // no baseline for p6
  f.samples.push_back(correct_sample(2, "p5.py", 0.001));  // p5 of another level
  const LevelScore s = score(f.samples, f.baselines).at(0);
  EXPECT_EQ(s.problems, 5);
  EXPECT_EQ(s.correct, 3);
  EXPECT_DOUBLE_EQ(s.fast_p.at(1.0), 1.0 / 5);
}

TEST(Score, AutoKernelThresholdsAreScoredStrictly) {
  // Speedups 1.05, 1.2, 1.3, 2.5, 6.0 and one wrong problem: n = 6.
  std::vector<Baseline> baselines;
  std::vector<SampleEval> samples;
  const std::vector<double> speedups = {1.05, 1.2, 1.3, 2.5, 6.0};
  for (size_t i = 0; i < speedups.size(); ++i) {
    const std::string name = "q" + std::to_string(i) + ".py";
    baselines.push_back(baseline(1, name, speedups[i]));
    samples.push_back(correct_sample(1, name, 1.0));
  }
  baselines.push_back(baseline(1, "wrong.py", 1));
  samples.push_back(incorrect_sample(1, "wrong.py", true));

  ScoreOptions options;
  options.thresholds = kAutoKernelThresholds;
  const LevelScore s = score(samples, baselines, options).at(0);
  ASSERT_EQ(s.fast_p.size(), kAutoKernelThresholds.size());
  EXPECT_DOUBLE_EQ(s.fast_p.at(1.0), 5.0 / 6);
  EXPECT_DOUBLE_EQ(s.fast_p.at(1.1), 4.0 / 6);
  EXPECT_DOUBLE_EQ(s.fast_p.at(1.25), 3.0 / 6);
  EXPECT_DOUBLE_EQ(s.fast_p.at(1.5), 2.0 / 6);
  EXPECT_DOUBLE_EQ(s.fast_p.at(2.0), 2.0 / 6);
  EXPECT_DOUBLE_EQ(s.fast_p.at(3.0), 1.0 / 6);
  EXPECT_DOUBLE_EQ(s.fast_p.at(5.0), 1.0 / 6);
}

// Problem a: sample 0 compiles but is wrong; samples 1 and 2 are correct in 2 ms and 1 ms.
// Problem b: sample 0 does not compile; sample 1 compiles but is wrong. Baselines 4 ms each.
struct ManySamples {
  std::vector<Baseline> baselines = {baseline(1, "a.py", 4), baseline(1, "b.py", 4)};
  std::vector<SampleEval> samples = {incorrect_sample(1, "a.py", true, 0), correct_sample(1, "a.py", 2, 1),
                                     correct_sample(1, "a.py", 1, 2), incorrect_sample(1, "b.py", false, 0),
                                     incorrect_sample(1, "b.py", true, 1)};
};

TEST(Score, ByDefaultOnlySampleZeroOfEachProblemIsScored) {
  ManySamples m;
  const LevelScore s = score(m.samples, m.baselines).at(0);
  EXPECT_EQ(s.compiled, 1);
  EXPECT_EQ(s.correct, 0);
  EXPECT_DOUBLE_EQ(s.geo_mean_speedup, 0.0);
  EXPECT_DOUBLE_EQ(s.fast_p.at(0.0), 0.0);
}

TEST(Score, BestSampleScoresTheFastestCorrectSampleAndAnySampleCompiling) {
  ManySamples m;
  ScoreOptions options;
  options.best_sample = true;
  const LevelScore s = score(m.samples, m.baselines, options).at(0);
  EXPECT_EQ(s.compiled, 2);
  EXPECT_EQ(s.correct, 1);
  EXPECT_DOUBLE_EQ(s.geo_mean_speedup, 4.0);  // 4 ms / 1 ms, not 4 ms / 2 ms
  EXPECT_DOUBLE_EQ(s.fast_p.at(2.0), 1.0 / 2);
}

TEST(Score, SampleZeroIsScoredEvenWhenALaterSampleIsFaster) {
  const std::vector<Baseline> baselines = {baseline(1, "a.py", 4)};
  const std::vector<SampleEval> samples = {correct_sample(1, "a.py", 1, 1), correct_sample(1, "a.py", 2, 0)};
  EXPECT_DOUBLE_EQ(score(samples, baselines).at(0).geo_mean_speedup, 2.0);
  ScoreOptions best;
  best.best_sample = true;
  EXPECT_DOUBLE_EQ(score(samples, baselines, best).at(0).geo_mean_speedup, 4.0);
}

TEST(Score, EachGpuModelIsScoredAgainstItsOwnBaselines) {
  const std::vector<Baseline> baselines = {baseline(1, "a.py", 4, "eager", kH200),
                                           baseline(1, "a.py", 6, "eager", kH100)};
  const std::vector<SampleEval> samples = {correct_sample(1, "a.py", 1, 0, kH200),
                                           correct_sample(1, "a.py", 2, 0, kH100)};
  const std::vector<LevelScore> scores = score(samples, baselines);
  ASSERT_EQ(scores.size(), 2u);
  EXPECT_EQ(scores[0].gpu_model, kH100);  // sorted by model
  EXPECT_DOUBLE_EQ(scores[0].geo_mean_speedup, 3.0);
  EXPECT_EQ(scores[1].gpu_model, kH200);
  EXPECT_DOUBLE_EQ(scores[1].geo_mean_speedup, 4.0);
}

TEST(Score, GpuModelsMatchRegardlessOfCase) {
  const std::vector<Baseline> baselines = {baseline(1, "a.py", 4, "eager", "NVIDIA H200")};
  const std::vector<SampleEval> samples = {correct_sample(1, "a.py", 1, 0, "nvidia h200")};
  const std::vector<LevelScore> scores = score(samples, baselines);
  ASSERT_EQ(scores.size(), 1u);
  EXPECT_EQ(scores[0].correct, 1);
  EXPECT_DOUBLE_EQ(scores[0].geo_mean_speedup, 4.0);
}

TEST(Score, AGpuModelWithEvaluationsButNoBaselinesGetsNoScore) {
  const std::vector<Baseline> baselines = {baseline(1, "a.py", 4, "eager", kH200)};
  const std::vector<SampleEval> samples = {correct_sample(1, "a.py", 1, 0, "NVIDIA A100")};
  const std::vector<LevelScore> scores = score(samples, baselines);
  ASSERT_EQ(scores.size(), 1u);
  EXPECT_EQ(scores[0].gpu_model, kH200);
  EXPECT_EQ(scores[0].correct, 0);
}

TEST(Score, EachBaselineModeIsScoredSeparately) {
  const std::vector<Baseline> baselines = {baseline(1, "a.py", 4, "eager"), baseline(1, "a.py", 2, "compile")};
  const std::vector<SampleEval> samples = {correct_sample(1, "a.py", 2)};
  const std::vector<LevelScore> scores = score(samples, baselines);
  ASSERT_EQ(scores.size(), 2u);
  EXPECT_EQ(scores[0].baseline_mode, "compile");
  EXPECT_DOUBLE_EQ(scores[0].geo_mean_speedup, 1.0);
  EXPECT_DOUBLE_EQ(scores[0].fast_p.at(1.0), 0.0);
  EXPECT_EQ(scores[1].baseline_mode, "eager");
  EXPECT_DOUBLE_EQ(scores[1].geo_mean_speedup, 2.0);
  EXPECT_DOUBLE_EQ(scores[1].fast_p.at(1.0), 1.0);
}

TEST(Score, ScoresAreSortedByLevelThenGpuModelThenMode) {
  const std::vector<Baseline> baselines = {
      baseline(2, "x.py", 1, "eager", kH200), baseline(1, "x.py", 1, "eager", kH200),
      baseline(1, "x.py", 1, "compile", kH200), baseline(2, "x.py", 1, "eager", kH100)};
  const std::vector<LevelScore> scores = score({}, baselines);
  ASSERT_EQ(scores.size(), 4u);
  EXPECT_EQ(scores[0].level, 1);
  EXPECT_EQ(scores[0].baseline_mode, "compile");
  EXPECT_EQ(scores[1].level, 1);
  EXPECT_EQ(scores[1].baseline_mode, "eager");
  EXPECT_EQ(scores[2].level, 2);
  EXPECT_EQ(scores[2].gpu_model, kH100);
  EXPECT_EQ(scores[3].level, 2);
  EXPECT_EQ(scores[3].gpu_model, kH200);
}

TEST(Score, NoBaselinesGiveNoScores) {
  EXPECT_TRUE(score({correct_sample(1, "a.py", 1)}, {}).empty());
}

TEST(Score, AProblemNameWithoutPySuffixMatchesOneWithIt) {
  // Hugging Face names lack ".py"; either side may be the one without it.
  const std::vector<Baseline> baselines = {baseline(1, "1_Square_matrix_multiplication_.py", 4),
                                           baseline(1, "2_Standard_matrix_multiplication_", 4)};
  const std::vector<SampleEval> samples = {correct_sample(1, "1_Square_matrix_multiplication_", 2),
                                           correct_sample(1, "2_Standard_matrix_multiplication_.py", 1)};
  const LevelScore s = score(samples, baselines).at(0);
  EXPECT_EQ(s.problems, 2);
  EXPECT_EQ(s.correct, 2);
  EXPECT_DOUBLE_EQ(s.geo_mean_speedup, std::sqrt(2.0 * 4.0));
}

TEST(Score, NoCorrectProblemGivesGeoMeanZeroAndFastPZero) {
  const std::vector<Baseline> baselines = {baseline(1, "a.py", 4), baseline(1, "b.py", 4)};
  const std::vector<SampleEval> samples = {incorrect_sample(1, "a.py", true), incorrect_sample(1, "b.py", false)};
  const LevelScore s = score(samples, baselines).at(0);
  EXPECT_EQ(s.correct, 0);
  EXPECT_EQ(s.compiled, 1);
  EXPECT_EQ(s.geo_mean_speedup, 0.0);
  for (const auto& [p, v] : s.fast_p) EXPECT_EQ(v, 0.0) << "fast_" << p;
}

TEST(Score, ACorrectSampleWithoutAUsableRuntimeIsScoredAsIncorrect) {
  // A verdict of correct with no timing cannot give a speedup; it must not be infinitely fast.
  const std::vector<Baseline> baselines = {baseline(1, "a.py", 4)};
  const std::vector<SampleEval> samples = {correct_sample(1, "a.py", 0)};
  const LevelScore s = score(samples, baselines).at(0);
  EXPECT_EQ(s.compiled, 1);
  EXPECT_EQ(s.correct, 0);
  EXPECT_EQ(s.geo_mean_speedup, 0.0);
  EXPECT_TRUE(std::isfinite(s.geo_mean_speedup));
}

TEST(ScoreJson, ThresholdKeysAreWrittenAsKernelBenchWritesThem) {
  FiveProblems f;
  ScoreOptions options;
  options.thresholds = kKernelBenchThresholds;
  options.thresholds.insert(options.thresholds.end(), kAutoKernelThresholds.begin(), kAutoKernelThresholds.end());
  const nlohmann::json j = score_json(score(f.samples, f.baselines, options));
  const nlohmann::json& fast_p = j.at("scores").at(0).at("fast_p");
  std::vector<std::string> keys;
  for (const auto& item : fast_p.items()) keys.push_back(item.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"0.0", "0.5", "0.8", "1.0", "1.1", "1.25", "1.5", "2.0", "3.0", "5.0"}));
  EXPECT_DOUBLE_EQ(fast_p.at("0.8").get<double>(), 2.0 / 5);
  EXPECT_DOUBLE_EQ(fast_p.at("1.1").get<double>(), 1.0 / 5);
}

TEST(ScoreJson, EachScoreCarriesItsDocumentedFields) {
  FiveProblems f;
  const nlohmann::json j = score_json(score(f.samples, f.baselines));
  ASSERT_EQ(j.at("scores").size(), 1u);
  const nlohmann::json& row = j.at("scores").at(0);
  EXPECT_EQ(row.at("level").get<int>(), 1);
  EXPECT_EQ(row.at("gpu_model").get<std::string>(), kH200);
  EXPECT_EQ(row.at("baseline").get<std::string>(), "eager");
  EXPECT_EQ(row.at("problems").get<int64_t>(), 5);
  EXPECT_EQ(row.at("compiled").get<int64_t>(), 4);
  EXPECT_EQ(row.at("correct").get<int64_t>(), 3);
  EXPECT_DOUBLE_EQ(row.at("compilation_rate").get<double>(), 0.8);
  EXPECT_DOUBLE_EQ(row.at("correctness_rate").get<double>(), 0.6);
  EXPECT_DOUBLE_EQ(row.at("geo_mean_speedup").get<double>(), std::cbrt(1.5));
  EXPECT_EQ(row.at("fast_p").size(), kKernelBenchThresholds.size());
}

TEST(ScoreJson, NoScoresGiveAnEmptyScoresArray) {
  const nlohmann::json j = score_json({});
  ASSERT_TRUE(j.at("scores").is_array());
  EXPECT_TRUE(j.at("scores").empty());
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(ScoreTable, HasAHeaderAndOneAlignedRowPerScoreWithAColumnPerThreshold) {
  const std::vector<Baseline> baselines = {baseline(1, "a.py", 4, "eager"), baseline(1, "a.py", 2, "compile")};
  const std::vector<SampleEval> samples = {correct_sample(1, "a.py", 2)};
  const std::vector<std::string> lines = lines_of(score_table(score(samples, baselines)));
  ASSERT_EQ(lines.size(), 3u);
  for (const char* column : {"level", "gpu model", "baseline", "n", "compiled", "correct", "geomean", "fast_0.0",
                             "fast_0.5", "fast_0.8", "fast_1.0", "fast_1.5", "fast_2.0"})
    EXPECT_NE(lines[0].find(column), std::string::npos) << column;
  EXPECT_EQ(lines[1].size(), lines[0].size());
  EXPECT_EQ(lines[2].size(), lines[0].size());
  EXPECT_NE(lines[1].find("compile"), std::string::npos);
  EXPECT_NE(lines[1].find(kH200), std::string::npos);
  EXPECT_NE(lines[2].find("eager"), std::string::npos);
  EXPECT_NE(lines[2].find("2.000"), std::string::npos);  // eager geomean
}

TEST(ScoreTable, NoScoresGiveTheHeaderOnly) {
  EXPECT_EQ(lines_of(score_table({})).size(), 1u);
}

// Baseline files in KernelBench's results/timing layout.
class BaselineFileTest : public ::testing::Test {
 protected:
  std::filesystem::path dir_ = std::filesystem::path(::testing::TempDir()) /
                               ("kb_baselines_" + std::to_string(::getpid()));
  void SetUp() override { std::filesystem::create_directories(dir_); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const auto p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
};

TEST_F(BaselineFileTest, ModeComesFromTheFileNameAndModelFromEachEntry) {
  const std::string doc =
      R"({"level1": {"1_A.py": {"mean": 2.5, "hardware": "NVIDIA H200"}}, "level3": {"4_B.py": {"mean": 0.75, "hardware": "NVIDIA H200"}}})";
  auto eager = load_baseline_file(write("baseline_time_torch.json", doc));
  ASSERT_TRUE(eager.ok()) << eager.status().message();
  ASSERT_EQ(eager->size(), 2u);
  EXPECT_EQ((*eager)[0].level, 1);
  EXPECT_EQ((*eager)[0].problem_name, "1_A.py");
  EXPECT_EQ((*eager)[0].mode, "eager");
  EXPECT_EQ((*eager)[0].gpu_model, kH200);
  EXPECT_EQ((*eager)[1].level, 3);
  EXPECT_DOUBLE_EQ((*eager)[1].mean_ms, 0.75);
  auto compiled = load_baseline_file(write("baseline_time_torch_compile_inductor_default.json", doc));
  ASSERT_TRUE(compiled.ok());
  EXPECT_EQ((*compiled)[0].mode, "compile");
  auto autotuned = load_baseline_file(write("baseline_time_torch_compile_inductor_max-autotune.json", doc));
  ASSERT_TRUE(autotuned.ok());
  EXPECT_EQ((*autotuned)[0].mode, "compile-max-autotune");
}

TEST_F(BaselineFileTest, EachModesFileNameReadsBackAsThatMode) {
  const std::string doc = R"({"level1": {"1_A.py": {"mean": 1.0, "hardware": "NVIDIA H200"}}})";
  for (const std::string given : {"eager", "compile", "compile-default", "compile-max-autotune"}) {
    auto mode = canonical_baseline_mode(given);
    ASSERT_TRUE(mode.ok()) << given;
    auto read = load_baseline_file(write(baseline_file_name(*mode), doc));
    ASSERT_TRUE(read.ok()) << given << ": " << read.status().message();
    EXPECT_EQ((*read)[0].mode, *mode) << given;
  }
  EXPECT_EQ(*canonical_baseline_mode("compile-default"), "compile");
  for (const std::string bad : {"fast", "compile-", ""}) EXPECT_FALSE(canonical_baseline_mode(bad).ok()) << bad;
}

TEST_F(BaselineFileTest, AFileWithoutHardwareNeedsTheModelAndBadFilesAreRefused) {
  const std::string p = write("baseline_time_torch.json", R"({"level2": {"7_C.py": {"mean": 1.0}}})");
  EXPECT_FALSE(load_baseline_file(p).ok());
  auto given = load_baseline_file(p, kH100);
  ASSERT_TRUE(given.ok());
  EXPECT_EQ((*given)[0].gpu_model, kH100);
  EXPECT_FALSE(load_baseline_file(write("timings.json", "{}")).ok());
  EXPECT_FALSE(load_baseline_file(write("baseline_time_torch.json", "[1, 2]")).ok());
  EXPECT_FALSE(load_baseline_file(write("baseline_time_torch.json", R"({"lvl1": {}})")).ok());
  EXPECT_FALSE(load_baseline_file(write("baseline_time_torch.json", R"({"level1x": {}})")).ok());
  EXPECT_FALSE(load_baseline_file(write("baseline_time_torch.json", R"({"level-1": {}})")).ok());
  EXPECT_FALSE(load_baseline_file(write("baseline_time_torch.json", R"({"level1": {"1_A.py": {"mean": 0}}})"), kH200).ok());
  EXPECT_FALSE(load_baseline_file((dir_ / "absent" / "baseline_time_torch.json").string()).ok());
}

// The strict part of a candidate the faithful check passes, as the harness writes it
// (kernelbench/HARNESS.md): the mutates_inputs.py cheat changes its input in place.
nlohmann::json clean_strict() {
  return {{"static_scan", {{"errors", nlohmann::json::array()}, {"warnings", {"torch_computation_ops"}}}},
          {"monkeypatch", nlohmann::json::array()},
          {"input_mutation", false},
          {"output_poison", false},
          {"side_stream", nullptr},
          {"rotation_suspect", false},
          {"excessive_speedup", true},
          {"check_errors", nlohmann::json::object()}};
}

TEST(StrictFailures, ACleanCandidateFailsNothingAndExcessiveSpeedupIsOnlyAFlag) {
  EXPECT_TRUE(strict_failures(clean_strict(), {{"ok", true}, {"strict_correct", true}}).empty());
  EXPECT_TRUE(strict_failures(nullptr, nullptr).empty()) << "checks that did not run fail nothing";
}

TEST(StrictFailures, EachFailedCheckIsNamedByItsKey) {
  nlohmann::json s = clean_strict();
  s["input_mutation"] = true;
  s["monkeypatch"] = {"Model.forward"};
  s["static_scan"]["errors"] = {"code_bypass"};
  EXPECT_EQ(strict_failures(s, {{"ok", true}, {"strict_correct", false}}),
            (std::vector<std::string>{"input_mutation", "monkeypatch", "static_scan", "judge"}));
}

TEST(VerdictTally, AStrictFailedCandidateIsCountedApartFromTheCorrectOnes) {
  VerdictTally t;
  t.add("correct", {}, true);
  t.add("correct", {}, true);
  t.add("correct", {"input_mutation"}, true);
  t.add("correct", {"input_mutation", "judge"}, true);
  t.add("incorrect", {}, true);
  t.add("compile_failure", {}, false);
  EXPECT_EQ(t.verdicts.at("correct"), 2);
  EXPECT_EQ(t.strict_failed, 2);
  EXPECT_EQ(t.line(), "correct 2, strict-failed 2 (input_mutation 2, judge 1), compile_failure 1, incorrect 1");
}

TEST(VerdictTally, CorrectCandidatesWithoutStrictChecksSaySo) {
  VerdictTally t;
  t.add("correct", {}, false);
  t.add("TIMEOUT", {}, false);
  EXPECT_EQ(t.line(), "correct 1 (1 without strict checks), TIMEOUT 1");
  EXPECT_EQ(VerdictTally{}.line(), "none");
}

}  // namespace
}  // namespace ak::kernelbench
