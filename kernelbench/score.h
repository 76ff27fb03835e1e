// The KernelBench scorer: fast_p exactly as KernelBench defines it (src/kernelbench/score.py and
// scripts/benchmark_eval_analysis.py of ScalingIntelligence/KernelBench), at KernelBench's
// thresholds and at AutoKernel's, and the geometric-mean speedup over correct problems; per
// level, per GPU model, against each baseline (eager, torch.compile).
//
// KernelBench's definition, kept here:
//   fast_p = #{problems whose sample is correct and baseline_ms / runtime_ms > p} / n
// strictly faster than p, divided by ALL n problems of the level that have a baseline (a problem
// without an evaluation counts as incorrect), not by the correct ones only. One sample per
// problem: the one with sample_id 0 (KernelBench scores sample 0), or, with
// ScoreOptions::best_sample, the fastest correct sample of the problem.
//   geo_mean_speedup = (prod over correct problems of baseline_ms / runtime_ms)^(1 / #correct),
// 0 when none is correct.
//   compilation_rate, correctness_rate: compiled (resp. correct) problems / n.
//
// Pure functions, but for load_baseline_file, which reads the file it is given; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace ak::kernelbench {

// KernelBench's thresholds and AutoKernel's.
inline const std::vector<double> kKernelBenchThresholds = {0.0, 0.5, 0.8, 1.0, 1.5, 2.0};
inline const std::vector<double> kAutoKernelThresholds = {1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0};

// One evaluated sample (a candidate ModelNew for one problem on one GPU model).
struct SampleEval {
  int level = 0;
  int problem_id = 0;
  std::string problem_name;  // file name with ".py", as KernelBench's baseline JSON keys it
  int sample_id = 0;
  std::string gpu_model;     // "NVIDIA H200"
  bool compiled = false;
  bool correct = false;      // the faithful verdict
  double runtime_ms = 0;     // mean of the faithful timing [ms]; meaningful when correct
};

// The strict checks a sample failed (kernelbench/HARNESS.md, "The strict checks" and "judge"),
// each named by its key in eval_results.json: "input_mutation", "output_poison", "side_stream",
// "rotation_suspect", "monkeypatch" (something was rebound), "static_scan" (a static error, not a
// warning), "check_errors" (a check raised) and "judge" (the separate judge found the outputs
// wrong: strict_correct false) and "witness" (the witness failed it: outputs on unseen inputs, or a
// timing below what was measured from outside its process; its "verdict" is "fail"). `strict`,
// `judge` and `witness` are the harness's and the worker's documents; null or absent (not run,
// --no-strict) fails nothing. excessive_speedup is a flag to look at, not a failure.
std::vector<std::string> strict_failures(const nlohmann::json& strict, const nlohmann::json& judge,
                                         const nlohmann::json& witness = nlohmann::json());

// The verdicts of a set of samples, for a summary line. A sample that KernelBench's faithful check
// calls correct but that failed a strict check is counted as "strict-failed", never as plainly
// "correct": fast_p still counts it (KernelBench's definition), the summary says so.
struct VerdictTally {
  std::map<std::string, int64_t> verdicts;       // "correct" (no strict failure), "incorrect", ...
  int64_t strict_failed = 0;                     // faithful-correct samples with a strict failure
  std::map<std::string, int64_t> failed_checks;  // check -> strict-failed samples that failed it
  int64_t unchecked = 0;                         // "correct" samples whose strict checks did not run

  // `verdict` as the harness writes it ("correct", "incorrect", "compile_failure",
  // "runtime_error") or a result status (TIMEOUT, CRASH, ...); `failures` from strict_failures.
  void add(const std::string& verdict, const std::vector<std::string>& failures, bool strict_ran);
  // "correct 8, strict-failed 2 (input_mutation 1, judge 1), incorrect 1"; "correct" first,
  // then "strict-failed", then the others by name; "none" when empty.
  std::string line() const;
};

// One baseline time of a problem on a GPU model.
struct Baseline {
  int level = 0;
  std::string problem_name;  // with ".py"
  std::string gpu_model;
  std::string mode;          // "eager", "compile" (inductor default), "compile-max-autotune", ...
  double mean_ms = 0;
};

struct ScoreOptions {
  std::vector<double> thresholds = kKernelBenchThresholds;
  bool best_sample = false;  // false: sample 0, as KernelBench
};

// The score of one (level, GPU model, baseline mode).
struct LevelScore {
  int level = 0;
  std::string gpu_model;
  std::string baseline_mode;
  int64_t problems = 0;      // n: problems of the level with a baseline of this mode and model
  int64_t compiled = 0;
  int64_t correct = 0;
  double compilation_rate = 0;
  double correctness_rate = 0;
  double geo_mean_speedup = 0;
  std::map<double, double> fast_p;  // threshold -> fraction of n
};

// Every (level, GPU model, baseline mode) that has baselines, sorted by those three.
std::vector<LevelScore> score(const std::vector<SampleEval>& samples, const std::vector<Baseline>& baselines,
                              const ScoreOptions& options = {});

// {"scores": [{level, gpu_model, baseline, problems, compiled, correct, compilation_rate,
//  correctness_rate, geo_mean_speedup, fast_p: {"0.0": x, "0.5": y, ...}}, ...]}; thresholds
// written with one decimal at least, as KernelBench's keys ("0.0", "1.25").
nlohmann::json score_json(const std::vector<LevelScore>& scores);
// A fixed-width table: one row per (level, GPU model, baseline), one column per threshold.
std::string score_table(const std::vector<LevelScore>& scores);

// A baseline mode as --modes names it: "eager", "compile" (inductor's default mode) or
// "compile-<inductor mode>". The name the files and the farm's rows give it back under
// ("compile-default" is "compile"), or kInvalid.
Result<std::string> canonical_baseline_mode(const std::string& mode);

// KernelBench's file of a mode's baselines: baseline_time_torch.json for "eager",
// baseline_time_torch_compile_inductor_<m>.json for "compile-<m>" ("default" for "compile"); the
// inverse of the file name's reading in load_baseline_file. `mode` as canonical_baseline_mode takes.
std::string baseline_file_name(const std::string& mode);

// The baselines of a KernelBench baseline file (results/timing/<hardware>/baseline_time_torch*.json:
// {"level1": {"<name>.py": {"mean": ms, "hardware": ..., ...}}}). The mode comes from the file
// name: baseline_time_torch.json is "eager", baseline_time_torch_compile_inductor_default.json
// "compile", ..._inductor_<m>.json "compile-<m>". The GPU model is each entry's "hardware" (written
// by `autokernel kb baseline`), else `gpu_model`; an entry with neither, a file of another name
// or a malformed document is an error.
Result<std::vector<Baseline>> load_baseline_file(const std::string& path, const std::string& gpu_model = "");

}  // namespace ak::kernelbench
