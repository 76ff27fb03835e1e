// KernelBench on a real farm of CPU workers (redis-server, coordinator, worker processes, the
// harness as their subprocesses): `autokernel kb baseline` over the project's own problems in
// KernelBench's format writes KernelBench's baseline file; `autokernel kb sweep` over a folder of
// generations gives each candidate its faithful verdict and the strict checks beside it, and the
// fast_p scores against the farm's baselines. The harness's own verdicts per candidate are tested
// in tests/kernelbench/harness_test.py; here the farm's plumbing: one job per sample, a hanging
// sample killed at its timeout without holding the others, results in Redis, files on disk.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tests/integration/farm.h"

namespace ak::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json(const fs::path& p) { return json::parse(read_text(p.string())); }

TEST(KernelBenchFarmTest, BaselinesThenASweepGiveVerdictsStrictColumnsAndFastP) {
  Farm farm;
  farm.start_coordinator();
  for (int i = 0; i < 2; ++i) farm.start_worker("kb" + std::to_string(i), 1);
  farm.wait_workers(2);
  const std::string problems = std::string(AK_SOURCE_DIR) + "/tests/kernelbench/problems";
  const std::string cands = std::string(AK_SOURCE_DIR) + "/tests/kernelbench/candidates";
  const fs::path out = fs::path(farm.dir()) / "kb";
  const std::vector<std::string> common = {"--kernelbench", problems, "--backend", "cpu", "--perf-trials", "5",
                                           "--correct-trials", "2", "--client", farm.client_endpoint()};

  // Baselines (eager) of level 1 problems 1, 7 and 9.
  std::vector<std::string> args = {"kb", "baseline", "--levels", "1", "--ids", "1,7,9", "--modes", "eager", "--out",
                                   out.string()};
  args.insert(args.end(), common.begin(), common.end());
  ASSERT_EQ(run_autokernel(args), 0);
  const json base = read_json(out / "results/timing/cpu/baseline_time_torch.json");
  ASSERT_TRUE(base.contains("level1"));
  EXPECT_EQ(base["level1"].size(), 3u);
  for (const char* name : {"1_Matmul.py", "7_ScaleShift.py", "9_Softmax.py"}) {
    ASSERT_TRUE(base["level1"].contains(name)) << name;
    EXPECT_GT(base["level1"][name]["mean"].get<double>(), 0) << name;
    EXPECT_EQ(base["level1"][name]["num_trials"], 5) << name;
  }

  // Generations in KernelBench's naming: a correct, a wrong, a crashing, a hanging and a cheating
  // sample, and a correct one for each of the other two problems.
  const fs::path gens = fs::path(farm.dir()) / "runs" / "r1";
  fs::create_directories(gens);
  const std::map<std::string, std::string> layout = {
      {"level_1_problem_1_sample_0_kernel.py", "matmul_correct.py"},
      {"level_1_problem_1_sample_1_kernel.py", "raises_in_forward.py"},
      {"level_1_problem_1_sample_2_kernel.py", "hangs_idle.py"},
      {"level_1_problem_1_sample_3_kernel.py", "monkeypatch_reference.py"},
      {"level_1_problem_1_sample_4_kernel.py", "syntax_error.py"},
      {"level_1_problem_7_sample_0_kernel.py", "scale_shift_correct.py"},
      {"level_1_problem_9_sample_0_kernel.py", "softmax_wrong.py"},
      {"level_1_problem_9_sample_1_kernel.py", "softmax_correct.py"},
  };
  for (const auto& [name, src] : layout) fs::copy_file(fs::path(cands) / src, gens / name);
  const fs::path sweep = fs::path(farm.dir()) / "sweep";
  args = {"kb", "sweep", "--levels", "1", "--ids", "1,7,9", "--generations", gens.parent_path().string(),
          "--sample-backend", "torch", "--job-timeout-ms", "90000", "--out", sweep.string()};
  args.insert(args.end(), common.begin(), common.end());
  const std::string sweep_log = (fs::path(farm.dir()) / "sweep.log").string();
  ASSERT_EQ(run_autokernel_to(args, sweep_log), 0) << read_text(sweep_log);
  // The summary never calls the cheat simply correct: the judge caught it (below).
  const std::string summary = read_text(sweep_log);
  EXPECT_NE(summary.find("strict-failed "), std::string::npos) << summary;
  EXPECT_NE(summary.find("judge 1"), std::string::npos) << summary;
  EXPECT_NE(summary.find("witness 1"), std::string::npos) << summary;

  // One result row per sample, with the status the faithful verdict gives.
  auto rows = farm.client().results(protocol::ResultsQuery{"", "", "kernelbench", "", ""});
  ASSERT_TRUE(rows.ok());
  std::map<std::pair<int, int>, json> by_sample;  // (problem, sample) -> row
  for (const json r : rows->rows) {
    const json task = r["kernelbench"]["task"];
    if (task["mode"] == "candidate") by_sample[{task["problem_id"].get<int>(), task["sample_id"].get<int>()}] = r;
  }
  ASSERT_EQ(by_sample.size(), layout.size());
  auto status = [&](int p, int s) { return by_sample.at({p, s})["correctness"].get<std::string>(); };
  auto kb = [&](int p, int s) { return by_sample.at({p, s})["kernelbench"]; };
  EXPECT_EQ(status(1, 0), "PASS");
  EXPECT_EQ(status(1, 1), "FAIL");
  EXPECT_EQ(kb(1, 1)["verdict"], "runtime_error");
  EXPECT_EQ(status(1, 2), "TIMEOUT") << by_sample.at({1, 2}).dump();
  EXPECT_EQ(status(1, 4), "COMPILE_ERROR");
  EXPECT_EQ(status(7, 0), "PASS");
  EXPECT_EQ(status(9, 0), "FAIL");
  EXPECT_EQ(kb(9, 0)["verdict"], "incorrect");
  EXPECT_EQ(status(9, 1), "PASS");
  // The cheat fools the faithful check (same process, same namespace) but neither the judge, which
  // compares with a reference computed in another process, nor the witness, whose reference never
  // met the candidate: the verdict stays the faithful one, the farm's status is the witness's.
  EXPECT_EQ(kb(1, 3)["verdict"], "correct");
  EXPECT_EQ(status(1, 3), "FAIL");
  EXPECT_EQ(kb(1, 3)["witness"]["verdict"], "fail") << kb(1, 3)["witness"].dump();
  EXPECT_EQ(kb(1, 3)["judge"]["strict_correct"], false) << kb(1, 3)["judge"].dump();
  EXPECT_EQ(kb(1, 0)["witness"]["verdict"], "pass") << kb(1, 0)["witness"].dump();
  EXPECT_EQ(kb(1, 0)["judge"]["strict_correct"], true) << kb(1, 0)["judge"].dump();
  // A correct sample is timed; its speedup is over the in-process reference.
  EXPECT_GT(kb(1, 0)["runtime_ms"].get<double>(), 0);

  // KernelBench's eval_results.json and the scores (sample 0 of each problem, as KernelBench):
  // problem 1 correct, 7 correct, 9 wrong: 2 of 3 correct.
  const json eval = read_json(sweep / "level1" / "eval_results.json");
  EXPECT_EQ(eval["1"].size(), 5u);
  EXPECT_EQ(eval["9"].size(), 2u);
  const json scores = read_json(sweep / "scores.json");
  const json s = scores["kernelbench"]["scores"][0];
  EXPECT_EQ(s["level"], 1);
  EXPECT_EQ(s["baseline"], "eager");
  EXPECT_EQ(s["problems"], 3);
  EXPECT_EQ(s["correct"], 2);
  EXPECT_NEAR(s["fast_p"]["0.0"].get<double>(), 2.0 / 3.0, 1e-9);
  EXPECT_TRUE(scores["autokernel"]["scores"][0]["fast_p"].contains("1.25"));
  std::printf("%s\n", scores.dump().c_str());
}

// kb baseline adds to the baseline file already in --out; kb sweep --wait-s stops following a
// campaign that has not finished (a hanging sample) and still writes its files, scored against the
// farm's baselines and those of --baselines files.
TEST(KernelBenchFarmTest, BaselinesAddUpInOneFileAndAShortWaitStillWritesTheScores) {
  Farm farm;
  farm.start_coordinator();
  farm.start_worker("kb0", 1);
  farm.wait_workers(1);
  const std::string problems = std::string(AK_SOURCE_DIR) + "/tests/kernelbench/problems";
  const fs::path out = fs::path(farm.dir()) / "kb";
  const std::vector<std::string> common = {"--kernelbench", problems, "--backend", "cpu", "--perf-trials", "3",
                                           "--correct-trials", "1", "--levels", "1", "--client",
                                           farm.client_endpoint()};
  for (const char* ids : {"1", "7"}) {
    std::vector<std::string> args = {"kb", "baseline", "--ids", ids, "--modes", "eager", "--out", out.string()};
    args.insert(args.end(), common.begin(), common.end());
    ASSERT_EQ(run_autokernel(args), 0) << ids;
  }
  const json base = read_json(out / "results/timing/cpu/baseline_time_torch.json");
  EXPECT_EQ(base["level1"].size(), 2u) << base.dump();
  EXPECT_TRUE(base["level1"].contains("1_Matmul.py"));
  EXPECT_TRUE(base["level1"].contains("7_ScaleShift.py"));

  // --skip-measured goes on where those stopped: of 1-7 only the five not measured run.
  {
    std::vector<std::string> args = {"kb", "baseline", "--ids", "1-7", "--modes", "eager", "--skip-measured",
                                     "--out", out.string()};
    args.insert(args.end(), common.begin(), common.end());
    const std::string log = (fs::path(farm.dir()) / "skip.log").string();
    ASSERT_EQ(run_autokernel_to(args, log), 0) << read_text(log);
    const std::string text = read_text(log);
    EXPECT_NE(text.find("skipping 2 of 7 problems"), std::string::npos) << text;
    EXPECT_NE(text.find("): 5 jobs"), std::string::npos) << text;
    // Where the five jobs' time went, phase by phase (eager: no compile phase).
    EXPECT_NE(text.find("time in the harness, summed over 5 jobs: start "), std::string::npos) << text;
    EXPECT_EQ(text.find("compile "), std::string::npos) << text;
    EXPECT_NE(text.find("  longest: level 1 "), std::string::npos) << text;
    const json after = read_json(out / "results/timing/cpu/baseline_time_torch.json");
    EXPECT_EQ(after["level1"].size(), 7u) << after.dump();
    EXPECT_EQ(after["level1"]["1_Matmul.py"], base["level1"]["1_Matmul.py"]);  // not measured again
    // Everything measured: nothing runs. On GPU workers without one --gpu-model: refused (a
    // baseline file is per GPU model).
    ASSERT_EQ(run_autokernel_to(args, log), 0) << read_text(log);
    EXPECT_NE(read_text(log).find("every selected problem is measured already"), std::string::npos) << read_text(log);
    std::vector<std::string> gpu = {"kb", "baseline", "--ids", "1", "--skip-measured", "--out", out.string(),
                                    "--kernelbench", problems, "--client", farm.client_endpoint()};
    ASSERT_EQ(run_autokernel_to(gpu, log), 2);
    EXPECT_NE(read_text(log).find("--skip-measured needs one --gpu-model"), std::string::npos) << read_text(log);
    args.insert(args.end(), {"--modes", "fast"});
    ASSERT_EQ(run_autokernel_to(args, log), 2);
    EXPECT_NE(read_text(log).find("'fast' is not eager, compile or compile-<mode>"), std::string::npos) << read_text(log);
  }

  // A baseline file for a problem the farm has not measured.
  const fs::path other = fs::path(farm.dir()) / "other" / "baseline_time_torch.json";
  fs::create_directories(other.parent_path());
  // (11 is outside the sweep's selection: not scored.)
  std::ofstream(other) << R"({"level1": {"12_Tril.py": {"mean": 1.0, "hardware": "cpu"},
                                         "11_CumsumLoop.py": {"mean": 1.0, "hardware": "cpu"}}})";
  const fs::path gens = fs::path(farm.dir()) / "gens";
  fs::create_directories(gens);
  fs::copy_file(std::string(AK_SOURCE_DIR) + "/tests/kernelbench/candidates/hangs.py",
                gens / "level_1_problem_1_sample_0_kernel.py");
  const fs::path sweep = fs::path(farm.dir()) / "sweep";
  std::vector<std::string> args = {"kb", "sweep", "--ids", "1,7,12", "--generations", gens.string(),
                                   "--sample-backend", "torch", "--job-timeout-ms", "60000", "--wait-s", "1",
                                   "--baselines", other.string(), "--out", sweep.string()};
  args.insert(args.end(), common.begin(), common.end());
  const std::string sweep_log = (fs::path(farm.dir()) / "sweep.log").string();
  EXPECT_EQ(run_autokernel_to(args, sweep_log), 1) << read_text(sweep_log);  // not complete
  const json scores = read_json(sweep / "scores.json");
  const json s = scores["kernelbench"]["scores"][0];
  EXPECT_EQ(s["problems"], 3) << scores.dump();  // 1 and 7 from the farm, 12 from the file, not 11
  EXPECT_EQ(scores["kernelbench"]["scores"].size(), 1u);
  EXPECT_EQ(s["correct"], 0);

  // The hanging sample still holds the worker's one KernelBench slot. Cancelling its campaign
  // kills it long before its 60 s timeout, and the slot serves the next campaign.
  const std::string text = read_text(sweep_log);
  const auto at = text.find("campaign ");
  ASSERT_NE(at, std::string::npos) << text;
  const std::string cid = text.substr(at + 9, text.find(' ', at + 9) - at - 9);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string cancel_log = (fs::path(farm.dir()) / "cancel.log").string();
  ASSERT_EQ(run_autokernel_to({"cancel", cid, "--reason", "test", "--client", farm.client_endpoint()}, cancel_log), 0)
      << read_text(cancel_log);
  EXPECT_NE(read_text(cancel_log).find("running told to stop"), std::string::npos) << read_text(cancel_log);
  const json st = farm.wait_campaign(cid, std::chrono::seconds(45));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(45));
  bool seen = false;
  for (const auto& c : st["campaigns"])
    if (c["campaign_id"] == cid) {
      seen = true;
      EXPECT_EQ(c.value("cancelled", false), true) << c.dump();
      EXPECT_EQ(c["finished"], c["total"]) << c.dump();
    }
  EXPECT_TRUE(seen) << st.dump();
  auto rows = farm.client().results(cid, "CANCELLED");
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->rows.size(), 1u) << json(rows->rows).dump();
  EXPECT_NE(rows->rows[0].reason.find("its campaign was cancelled; stopped in its"), std::string::npos)
      << json(rows->rows).dump();
  // An unknown campaign is refused with the reason.
  ASSERT_EQ(run_autokernel_to({"cancel", "nope", "--client", farm.client_endpoint()}, cancel_log), 1);
  EXPECT_NE(read_text(cancel_log).find("no campaign 'nope'"), std::string::npos) << read_text(cancel_log);
  // --cancel-at-stop does the same when the wait ends: the next campaign finds the slot free.
  args.push_back("--cancel-at-stop");
  EXPECT_EQ(run_autokernel_to(args, sweep_log), 1) << read_text(sweep_log);
  EXPECT_NE(read_text(sweep_log).find("s and cancelled it: "), std::string::npos) << read_text(sweep_log);
  std::vector<std::string> next = {"kb", "baseline", "--ids", "12", "--modes", "eager", "--out", out.string(),
                                   "--wait-s", "45"};
  next.insert(next.end(), common.begin(), common.end());
  EXPECT_EQ(run_autokernel(next), 0);
}

// kb score: a sweep's eval_results files scored offline against baseline files, by hand: KernelBench
// scores sample 0, counts a problem without a correct sample 0 as not fast, and is strict at p.
TEST(KernelBenchScoreTest, ScoresEvalResultsFilesAgainstBaselineFilesAsKernelBenchDefinesFastP) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("kb_score_" + std::to_string(::getpid()));
  fs::create_directories(dir / "sweep" / "level1");
  auto write = [](const fs::path& p, const json& j) { std::ofstream(p) << j.dump(1); };
  const json hw = {{"hardware", "GPU X"}, {"device", "cuda:0"}};
  // Sample 0 of problem 1 is correct at 1.0 ms; problem 7's sample 0 is wrong (its fast sample 1
  // does not count); problem 9's did not compile and names no hardware (it ran where the others did).
  const fs::path eval = dir / "sweep" / "level1" / "eval_results.json";
  write(eval, {{"1", json::array({{{"sample_id", 0}, {"compiled", true}, {"correctness", true}, {"runtime", 1.0},
                                   {"metadata", hw}}})},
               {"7", {{"0", {{"compiled", true}, {"correctness", false}, {"runtime", -1.0}, {"metadata", hw}}},
                      {"1", {{"compiled", true}, {"correctness", true}, {"runtime", 0.5}, {"metadata", hw}}}}},
               {"9", json::array({{{"sample_id", 0}, {"compiled", false}, {"correctness", false}, {"runtime", -1.0}}})}});
  auto entry = [](double ms) { return json{{"mean", ms}, {"hardware", "GPU X"}}; };
  const fs::path eager = dir / "baseline_time_torch.json";
  write(eager, {{"level1", {{"1_Matmul.py", entry(2.0)}, {"7_ScaleShift.py", entry(1.0)}, {"9_Softmax.py", entry(4.0)}}}});
  const fs::path compiled = dir / "baseline_time_torch_compile_inductor_default.json";
  write(compiled, {{"level1", {{"1_Matmul.py", entry(1.0)}, {"7_ScaleShift.py", entry(1.0)}, {"9_Softmax.py", entry(2.0)}}}});
  const std::string problems = std::string(AK_SOURCE_DIR) + "/tests/kernelbench/problems";
  const fs::path out = dir / "scores.json";
  const std::string log = (dir / "score.log").string();
  ASSERT_EQ(run_autokernel_to({"kb", "score", "--kernelbench", problems, "--eval-results", eval.string(), "--baselines",
                               eager.string(), "--baselines", compiled.string(), "--json", out.string()},
                              log),
            0)
      << read_text(log);
  const json scores = read_json(out);
  std::map<std::string, json> by_mode;
  for (const auto& s : scores["kernelbench"]["scores"]) by_mode[s["baseline"].get<std::string>()] = s;
  ASSERT_EQ(by_mode.size(), 2u) << scores.dump();
  const json& e = by_mode["eager"];
  EXPECT_EQ(e["gpu_model"], "GPU X");
  EXPECT_EQ(e["problems"], 3);
  EXPECT_EQ(e["compiled"], 2);
  EXPECT_EQ(e["correct"], 1);
  EXPECT_DOUBLE_EQ(e["geo_mean_speedup"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(e["fast_p"]["1.5"].get<double>(), 1.0 / 3);
  EXPECT_DOUBLE_EQ(e["fast_p"]["2.0"].get<double>(), 0.0);  // 2.0x is not faster than 2.0
  const json& c = by_mode["compile"];
  EXPECT_DOUBLE_EQ(c["geo_mean_speedup"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(c["fast_p"]["0.8"].get<double>(), 1.0 / 3);
  EXPECT_DOUBLE_EQ(c["fast_p"]["1.0"].get<double>(), 0.0);
  EXPECT_EQ(scores["autokernel"]["scores"].size(), 2u);
  EXPECT_NE(read_text(log).find("fast_p at kernelbench's thresholds:"), std::string::npos) << read_text(log);

  // --ids narrows n to the selected problems.
  ASSERT_EQ(run_autokernel_to({"kb", "score", "--kernelbench", problems, "--eval-results", eval.string(), "--baselines",
                               eager.string(), "--ids", "1", "--json", out.string()},
                              log),
            0)
      << read_text(log);
  EXPECT_EQ(read_json(out)["kernelbench"]["scores"][0]["problems"], 1);
  EXPECT_DOUBLE_EQ(read_json(out)["kernelbench"]["scores"][0]["fast_p"]["1.5"].get<double>(), 1.0);

  // Bad input: a file whose path names no level, a problem the checkout lacks.
  const fs::path nolevel = dir / "eval_results.json";
  fs::copy_file(eval, nolevel);
  EXPECT_EQ(run_autokernel_to({"kb", "score", "--kernelbench", problems, "--eval-results", nolevel.string(),
                               "--baselines", eager.string()},
                              log),
            2);
  EXPECT_NE(read_text(log).find("no level<N> of KernelBench's 1-4 in its path"), std::string::npos) << read_text(log);
  write(eval, {{"99", json::array()}});
  EXPECT_EQ(run_autokernel_to({"kb", "score", "--kernelbench", problems, "--eval-results", eval.string(),
                               "--baselines", eager.string()},
                              log),
            2);
  EXPECT_NE(read_text(log).find("level 1 problem 99 is not in --kernelbench"), std::string::npos) << read_text(log);
  // Fields of another type than KernelBench writes are an error, not a crash or a guess.
  write(eval, {{"1", json::array({{{"sample_id", 0}, {"compiled", 1}, {"correctness", true}, {"runtime", 1.0}}})}});
  EXPECT_EQ(run_autokernel_to({"kb", "score", "--kernelbench", problems, "--eval-results", eval.string(),
                               "--baselines", eager.string()},
                              log),
            2);
  EXPECT_NE(read_text(log).find("compiled is 1, not true or false"), std::string::npos) << read_text(log);
  write(eval, {{"1", json::array({{{"sample_id", 4294967296LL}, {"compiled", true}, {"correctness", true}}})}});
  EXPECT_EQ(run_autokernel_to({"kb", "score", "--kernelbench", problems, "--eval-results", eval.string(),
                               "--baselines", eager.string()},
                              log),
            2);
  EXPECT_NE(read_text(log).find("is not a sample number"), std::string::npos) << read_text(log);
  write(eval, {{"1", json::array({{{"sample_id", 0}, {"compiled", true}, {"correctness", true}, {"metadata", 3}}})}});
  EXPECT_EQ(run_autokernel_to({"kb", "score", "--kernelbench", problems, "--eval-results", eval.string(),
                               "--baselines", eager.string()},
                              log),
            2);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ak::testing
