// autokernel kb baseline | sweep | score: KernelBench on the farm (score: offline, from files). Reads the problems (and generations)
// from local folders (kernelbench/bridge.h) or generates the built-in candidates
// (kernelbench/builtin.h), submits a KernelBench campaign (coordinator/kernelbench_campaign.h),
// follows it, and writes KernelBench's files: the baseline JSON of results/timing/<hardware>/,
// eval_results.json per level, and the fast_p scores.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/format.h"
#include "coordinator/client.h"
#include "coordinator/study.h"
#include "kernelbench/bridge.h"
#include "kernelbench/builtin.h"
#include "kernelbench/score.h"

namespace ak::cli {

namespace fs = std::filesystem;
using nlohmann::json;
namespace pr = protocol;

namespace {

Result<kernelbench::Selection> selection_of(const KbArgs& a) {
  kernelbench::Selection sel;
  if (!a.levels.empty()) {
    auto lv = kernelbench::parse_id_ranges(a.levels);
    if (!lv.ok()) return Status::invalid("--levels: " + lv.status().message());
    sel.levels = *lv;
  }
  if (!a.ids.empty()) {
    auto ids = kernelbench::parse_id_ranges(a.ids);
    if (!ids.ok()) return Status::invalid("--ids: " + ids.status().message());
    sel.ids = *ids;
  }
  return sel;
}

json campaign_base(const KbArgs& a, const std::string& task) {
  json doc = {{"kind", "kernelbench"},
              {"task", task},
              {"name", a.name.empty() ? "kernelbench " + task : a.name},
              {"backend", a.backend},
              {"precision", a.precision},
              {"num_correct_trials", a.correct_trials},
              {"num_perf_trials", a.perf_trials},
              {"timeout_ms", a.timeout_ms},
              {"strict", a.strict},
              {"switches", {{"keep_integer_inputs", a.keep_integer_inputs}}}};
  if (!a.gpu_models.empty()) doc["gpu_models"] = a.gpu_models;
  return doc;
}

json problems_json(const std::vector<kernelbench::Problem>& ps) {
  json out = json::array();
  for (const auto& p : ps)
    out.push_back({{"level", p.level}, {"problem_id", p.problem_id}, {"name", p.name}, {"code", p.code}});
  return out;
}

// A campaign followed to its end, or to --wait-s or an interrupt: the rows of the jobs that
// finished.
struct CampaignRun {
  std::string id;
  std::vector<pr::ResultRow> rows;
  bool complete = false;
  int64_t jobs = 0;
  double wall_s = 0;
};

// Submits and follows the campaign. If the wait ends early (deadline, Ctrl-C) the rows that
// finished still come back, marked incomplete; only a lost coordinator is an error.
Result<CampaignRun> run_campaign(const ClientArgs& c, const KbArgs& a, const json& doc) {
  CoordinatorClient client(c.endpoint, std::chrono::milliseconds(c.timeout_ms), c.curve);
  const auto t0 = std::chrono::steady_clock::now();
  auto sub = client.submit(doc);
  if (!sub.ok()) return Status::invalid("campaign rejected: " + sub.status().message());
  CampaignRun run;
  run.id = sub->campaign_id;
  run.jobs = sub->jobs;
  std::cout << "campaign " << run.id << " (" << sub->name << "): " << run.jobs << " jobs\n";
  // (capped at a year, so the conversion to the clock's nanoseconds cannot overflow)
  const auto deadline = a.wait_s > 0 ? t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                std::chrono::duration<double>(std::min(a.wait_s, 3.2e7)))
                                     : std::chrono::steady_clock::time_point::max();
  run.complete = wait_for_campaign(client, run.id, stop_flag(), deadline);
  run.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto rows = client.results(run.id, "");
  if (!rows.ok()) return Status::unavailable("coordinator lost: " + rows.status().message());
  // Jobs of a campaign cancelled (here or by someone else) measured nothing: they are neither
  // results nor failures in the files below.
  for (auto& r : rows->rows)
    if (r.correctness != "CANCELLED") run.rows.push_back(std::move(r));
  if (!run.complete && a.cancel_at_stop) {
    auto c = client.cancel(run.id, "the client stopped following it");
    if (!c.ok()) {
      // The rows that finished are still worth their files.
      std::cerr << "campaign " << run.id << " not cancelled, its jobs go on in the farm: " << c.status().message()
                << "\n";
      return run;
    }
    std::cout << "stopped following campaign " << run.id << " after " << static_cast<long long>(run.wall_s)
              << " s and cancelled it: " << run.rows.size() << " of " << run.jobs << " jobs finished, " << c->cancelled
              << " queued ended, " << c->stopping << " running stopped\n";
  } else if (!run.complete) {
    std::cout << "stopped following campaign " << run.id << " after " << static_cast<long long>(run.wall_s) << " s: "
              << run.rows.size() << " of " << run.jobs
              << " jobs finished; the files below hold those, the others go on in the farm\n";
  }
  return run;
}

std::string hardware_dir(std::string gpu) {
  for (char& ch : gpu)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return gpu;
}

Status write_json(const fs::path& p, const json& j) {
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  return write_file(p.string(), j.dump(2) + "\n");
}

// results/timing/<hardware> of a GPU model under `out`: a folder already there whose name differs
// only in case (a model given as --gpu-model "nvidia h200"), else the model's own.
fs::path timing_dir(const std::string& out, const std::string& gpu) {
  const fs::path timing = fs::path(out) / "results" / "timing";
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(timing, ec))
    if (d.is_directory() && gpu_model_key(d.path().filename().string()) == gpu_model_key(hardware_dir(gpu)))
      return d.path();
  return timing / hardware_dir(gpu);
}

std::string mode_of(const pr::KernelBenchTaskRow& task) {
  if (task.mode != "baseline") return "candidate";
  if (!task.compile) return "eager";
  return task.compile_mode == "default" ? "compile" : "compile-" + task.compile_mode;
}

// The task of a KernelBench row (the coordinator adds it to every one), or an empty one.
const pr::KernelBenchTaskRow& task_of(const pr::KernelBenchVerdict& kb) {
  static const pr::KernelBenchTaskRow kNone;
  return kb.task ? *kb.task : kNone;
}

// Baselines of every KernelBench baseline row the farm holds (optionally of some campaigns).
std::vector<kernelbench::Baseline> farm_baselines(const std::vector<pr::ResultRow>& rows) {
  std::vector<kernelbench::Baseline> out;
  for (const auto& r : rows) {
    if (!r.kernelbench || r.correctness != "PASS") continue;
    const pr::KernelBenchTaskRow& task = task_of(*r.kernelbench);
    if (task.mode != "baseline") continue;
    const auto& b = r.kernelbench->baseline;
    out.push_back({task.level, task.problem_name, r.gpu, mode_of(task), b ? b->mean_ms.value_or(0.0) : 0.0});
  }
  return out;
}

// Where the harness processes' time went, summed over the measured jobs (the result's "phases_s"
// and "gpu_lock"), and the jobs that took longest: which phase a sweep's wall time is made of.
// Every --baselines file, read before anything runs (a bad one costs no sweep); entries that name
// no hardware are of the one --gpu-model, when there is one.
Result<std::vector<std::vector<kernelbench::Baseline>>> load_baseline_files(const KbArgs& a) {
  std::vector<std::vector<kernelbench::Baseline>> loaded;
  for (const auto& f : a.baseline_files) {
    auto fb = kernelbench::load_baseline_file(f, a.gpu_models.size() == 1 ? a.gpu_models.front() : "");
    if (!fb.ok()) return Status::invalid("--baselines: " + fb.status().message());
    loaded.push_back(std::move(*fb));
  }
  return loaded;
}

// The baselines of `files` (read beforehand, `loaded[i]` from `files[i]`) that `baselines` lacks:
// a (level, problem, GPU model, mode) already there, or in an earlier file, keeps its figure.
void add_file_baselines(std::vector<kernelbench::Baseline>& baselines, const std::vector<std::string>& files,
                        std::vector<std::vector<kernelbench::Baseline>>& loaded) {
  std::set<std::tuple<int, std::string, std::string, std::string>> have;
  for (const auto& b : baselines) have.insert({b.level, b.problem_name, b.gpu_model, b.mode});
  for (size_t i = 0; i < files.size(); ++i) {
    size_t used = 0;
    for (auto& b : loaded[i])
      if (have.insert({b.level, b.problem_name, b.gpu_model, b.mode}).second) {
        baselines.push_back(std::move(b));
        ++used;
      }
    std::cout << "baselines from " << files[i] << ": " << used << " of " << loaded[i].size()
              << " entries added (the others the farm or an earlier file has; only the selected problems are scored)\n";
  }
}

void keep_selected(std::vector<kernelbench::Baseline>& baselines, const kernelbench::Selection& sel) {
  std::erase_if(baselines, [&](const kernelbench::Baseline& b) {
    const auto id = kernelbench::problem_id_of(b.problem_name);
    return !id || !sel.matches(b.level, *id);
  });
}

// The fast_p tables at KernelBench's thresholds and at AutoKernel's, printed; their JSON is
// scores.json: {"kernelbench": score_json, "autokernel": score_json}.
json print_scores(const std::vector<kernelbench::SampleEval>& evals, const std::vector<kernelbench::Baseline>& baselines) {
  json scores = json::object();
  for (const auto& [label, thresholds] : {std::pair{std::string("kernelbench"), kernelbench::kKernelBenchThresholds},
                                          std::pair{std::string("autokernel"), kernelbench::kAutoKernelThresholds}}) {
    kernelbench::ScoreOptions o;
    o.thresholds = thresholds;
    const auto s = kernelbench::score(evals, baselines, o);
    std::cout << "fast_p at " << label << "'s thresholds:\n" << kernelbench::score_table(s);
    scores[label] = kernelbench::score_json(s);
  }
  return scores;
}

// The verdicts line of a summary, and what a strict failure means for the scores below it.
void print_verdicts(const kernelbench::VerdictTally& t) {
  std::cout << "verdicts: " << t.line() << "\n";
  if (t.strict_failed > 0)
    std::cout << "  strict-failed: " << t.strict_failed
              << " correct by KernelBench's own check (fast_p counts them, as KernelBench would) that failed a "
                 "strict check; see \"strict\" and \"judge\" in eval_results.json\n";
}

void print_phase_summary(const std::vector<pr::ResultRow>& rows) {
  static const char* kOrder[] = {"start", "load", "inputs", "shared_wait", "build", "compile", "exclusive_wait", "timed"};
  std::map<std::string, double> sum;
  std::vector<std::pair<double, std::string>> longest;  // (job's seconds, "level name (phases)")
  int jobs = 0;
  for (const auto& r : rows) {
    if (!r.kernelbench || r.correctness != "PASS") continue;
    const pr::KernelBenchVerdict& kb = *r.kernelbench;
    if (!kb.baseline || !kb.baseline->phases_s || kb.baseline->phases_s->empty()) continue;
    const std::map<std::string, double>& phases = *kb.baseline->phases_s;
    ++jobs;
    double total = 0;
    std::string parts;
    for (const char* name : kOrder) {
      const auto it = phases.find(name);
      if (it == phases.end()) continue;
      const double v = it->second;
      sum[name] += v;
      total += v;
      if (v >= 0.05) parts += fmt::format("{}{} {:.1f}", parts.empty() ? "" : ", ", name, v);
    }
    const pr::KernelBenchTaskRow& task = task_of(kb);
    longest.emplace_back(total, fmt::format("level {} {} {:.1f} s ({})", task.level, task.problem_name, total, parts));
  }
  if (jobs == 0) return;
  std::string line;
  for (const char* name : kOrder)
    if (sum.contains(name)) line += fmt::format("{}{} {:.1f} s", line.empty() ? "" : ", ", name, sum[name]);
  std::cout << "time in the harness, summed over " << jobs << " jobs: " << line << "\n";
  std::sort(longest.begin(), longest.end(), std::greater<>());
  for (size_t i = 0; i < std::min<size_t>(5, longest.size()); ++i) std::cout << "  longest: " << longest[i].second << "\n";
}

// --builtin: the built-in candidate of every selected problem that has one, written to
// <out>/builtin/ in KernelBench's naming (sample 0); prints which problems are covered and why the
// others are not.
Result<std::vector<kernelbench::Generation>> builtin_generations(const KbArgs& a,
                                                                 const std::vector<kernelbench::Problem>& problems) {
  std::optional<kernels::TunedConfigs> tuned;
  if (!a.tuning.empty()) {
    if (a.gpu_models.size() != 1)
      return Status::invalid("--tuning needs exactly one --gpu-model: tuned configurations are per GPU model (got " +
                             std::to_string(a.gpu_models.size()) + ")");
    auto t = kernels::TunedConfigs::load(a.tuning);
    if (!t.ok()) return t.status();
    tuned = std::move(*t);
  }
  const kernelbench::BuiltinOptions o{a.precision, tuned ? &*tuned : nullptr, a.tuning,
                                      a.gpu_models.empty() ? "" : a.gpu_models.front(), a.python};
  const fs::path dir = fs::path(a.out) / "builtin";
  std::vector<kernelbench::Generation> out;
  int skipped = 0;
  for (const auto& p : problems) {
    auto c = kernelbench::builtin_candidate(p, o);
    if (!c.ok()) {
      if (c.status().code() != StatusCode::kNotFound) return c.status();
      ++skipped;
      std::cout << "  not covered: level " << p.level << " " << p.name << ": " << c.status().message() << "\n";
      continue;
    }
    const fs::path f = dir / kernelbench::generation_file_name(p.level, p.problem_id, 0);
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (Status s = write_file(f.string(), c->source); !s.ok()) return s;
    std::cout << "  covered: level " << p.level << " " << p.name << ": " << c->kernel_type << ", "
              << (c->tuned ? "tuned" : "default") << " configuration (" << c->config_origin << ")\n";
    out.push_back({p.level, p.problem_id, 0, f.string(), c->source, kernelbench::xxh64_hex(c->source)});
  }
  std::cout << "built-in candidates: " << out.size() << " covered, " << skipped << " not covered, written to "
            << dir.string() << "\n";
  return out;
}

// --skip-measured: the problems that the baseline files in --out do not hold in every mode of
// --modes for the campaign's one GPU model.
Result<std::vector<kernelbench::Problem>> unmeasured(const KbArgs& a, std::vector<kernelbench::Problem> problems) {
  std::string gpu;
  if (a.backend == "cpu") {
    gpu = "cpu";
  } else if (a.gpu_models.size() == 1) {
    gpu = a.gpu_models.front();
  } else {
    return Status::invalid("--skip-measured needs one --gpu-model: baseline files are per GPU model (got " +
                           std::to_string(a.gpu_models.size()) + ")");
  }
  std::set<std::string> wanted;
  for (const auto& m : a.baselines) {
    auto mode = kernelbench::canonical_baseline_mode(m);
    if (!mode.ok()) return Status::invalid("--modes: " + mode.status().message());
    wanted.insert(*mode);
  }
  const fs::path dir = timing_dir(a.out, gpu);
  std::map<std::pair<int, std::string>, std::set<std::string>> modes_measured;
  for (const auto& mode : wanted) {
    const fs::path p = dir / kernelbench::baseline_file_name(mode);
    if (!fs::exists(p)) continue;
    auto entries = kernelbench::load_baseline_file(p.string(), gpu);
    if (!entries.ok()) return entries.status();
    for (const auto& e : *entries)
      if (gpu_model_key(e.gpu_model) == gpu_model_key(gpu)) modes_measured[{e.level, e.problem_name}].insert(e.mode);
  }
  const size_t before = problems.size();
  std::erase_if(problems, [&](const kernelbench::Problem& p) {
    const auto it = modes_measured.find({p.level, p.name});
    return it != modes_measured.end() &&
           std::all_of(wanted.begin(), wanted.end(), [&](const std::string& m) { return it->second.contains(m); });
  });
  std::cout << "skipping " << before - problems.size() << " of " << before << " problems: measured in every mode in "
            << dir.string() << "\n";
  return problems;
}

}  // namespace

int kb_baseline(const ClientArgs& c, const KbArgs& a) {
  auto sel = selection_of(a);
  if (!sel.ok()) {
    std::cerr << "autokernel kb baseline: " << sel.status().message() << "\n";
    return 2;
  }
  auto problems = kernelbench::load_problems(a.kernelbench, *sel, a.python);
  if (!problems.ok() || problems->empty()) {
    std::cerr << "autokernel kb baseline: "
              << (problems.ok() ? "no problem matches the selection" : problems.status().message()) << "\n";
    return 2;
  }
  if (a.skip_measured) {
    auto left = unmeasured(a, std::move(*problems));
    if (!left.ok()) {
      std::cerr << "autokernel kb baseline: " << left.status().message() << "\n";
      return 2;
    }
    problems = std::move(*left);
    if (problems->empty()) {
      std::cout << "baselines: every selected problem is measured already\n";
      return 0;
    }
  }
  json doc = campaign_base(a, "baseline");
  doc["baselines"] = a.baselines;
  doc["problems"] = problems_json(*problems);
  auto run = run_campaign(c, a, doc);
  if (!run.ok()) {
    std::cerr << "autokernel kb baseline: " << run.status().message() << "\n";
    return 1;
  }
  const std::vector<pr::ResultRow>* rows = &run->rows;
  // KernelBench's layout: results/timing/<hardware>/<file>: {"level1": {"<name>.py": stats}}.
  std::map<std::pair<std::string, std::string>, json> files;  // (GPU model, mode) -> document
  int ok = 0, failed = 0;
  for (const auto& r : *rows) {
    if (!r.kernelbench) continue;
    const pr::KernelBenchVerdict& kb = *r.kernelbench;
    const pr::KernelBenchTaskRow& task = task_of(kb);
    if (r.correctness != "PASS") {
      ++failed;
      std::cout << "  failed: level " << task.level << " " << task.problem_name << " " << mode_of(task) << ": "
                << r.correctness << " " << r.reason << "\n";
      continue;
    }
    ++ok;
    const pr::KernelBenchBaseline b = kb.baseline.value_or(pr::KernelBenchBaseline{});
    json stats = b.stats.value_or(json::object());
    stats["hardware"] = b.hardware.value_or(r.gpu);
    stats["device"] = b.device.value_or("");
    files[{r.gpu, mode_of(task)}]["level" + std::to_string(task.level)][task.problem_name] = stats;
  }
  // Into the file already there, if any: the problems measured now replace their entries, the
  // others stay, so levels or id ranges measured one after the other build one file.
  for (const auto& [key, measured] : files) {
    const fs::path p = timing_dir(a.out, key.first) / kernelbench::baseline_file_name(key.second);
    json doc_ = json::object();
    if (std::ifstream in(p); in) {
      doc_ = json::parse(in, nullptr, /*allow_exceptions=*/false);
      const bool levels_are_objects =
          doc_.is_object() && std::all_of(doc_.begin(), doc_.end(), [](const json& v) { return v.is_object(); });
      if (!levels_are_objects) {
        std::cerr << "autokernel kb baseline: " << p.string()
                  << " exists and is not a baseline file ({\"level1\": {problem: stats}, ...}); move it away or pick "
                     "another --out\n";
        return 1;
      }
    }
    size_t n = 0, kept = 0;
    for (const auto& [level, entries] : measured.items()) {
      for (const auto& [name, stats] : entries.items()) doc_[level][name] = stats;
      n += entries.size();
    }
    for (const auto& [level, entries] : doc_.items()) kept += entries.size();
    if (Status s = write_json(p, doc_); !s.ok()) {
      std::cerr << "autokernel kb baseline: " << s.message() << "\n";
      return 1;
    }
    std::cout << "wrote " << p.string() << ": " << n << " measured now, " << kept << " in the file\n";
  }
  print_phase_summary(*rows);
  std::printf("baselines: %d measured, %d failed, %zu problems x %zu modes, wall %.1f s (campaign %s)%s\n", ok,
              failed, problems->size(), a.baselines.size(), run->wall_s, run->id.c_str(),
              run->complete ? "" : ", not complete");
  return failed == 0 && run->complete ? 0 : 1;
}

int kb_sweep(const ClientArgs& c, const KbArgs& a) {
  auto sel = selection_of(a);
  if (!sel.ok()) {
    std::cerr << "autokernel kb sweep: " << sel.status().message() << "\n";
    return 2;
  }
  if (a.builtin == !a.generations.empty()) {
    std::cerr << "autokernel kb sweep: give either --generations FOLDER or --builtin\n";
    return 2;
  }
  if (!a.tuning.empty() && !a.builtin) {
    std::cerr << "autokernel kb sweep: --tuning goes with --builtin\n";
    return 2;
  }
  auto problems = kernelbench::load_problems(a.kernelbench, *sel, a.python);
  if (!problems.ok()) {
    std::cerr << "autokernel kb sweep: " << problems.status().message() << "\n";
    return 2;
  }
  auto gens = a.builtin ? builtin_generations(a, *problems) : kernelbench::load_generations(a.generations, *sel);
  if (!gens.ok() || gens->empty()) {
    std::cerr << "autokernel kb sweep: " << (gens.ok() ? "no generation matches the selection" : gens.status().message())
              << "\n";
    return 2;
  }
  auto file_baselines = load_baseline_files(a);
  if (!file_baselines.ok()) {
    std::cerr << "autokernel kb sweep: " << file_baselines.status().message() << "\n";
    return 2;
  }
  json doc = campaign_base(a, "candidates");
  doc["problems"] = problems_json(*problems);
  json samples = json::array();
  // Built-in candidates launch the library's Triton kernels, whatever --sample-backend says.
  const std::string sample_backend = a.builtin ? "triton" : a.sample_backend;
  for (const auto& g : *gens)
    samples.push_back({{"level", g.level}, {"problem_id", g.problem_id}, {"sample_id", g.sample_id}, {"code", g.code},
                       {"backend", sample_backend}});
  doc["samples"] = samples;
  auto run = run_campaign(c, a, doc);
  if (!run.ok()) {
    std::cerr << "autokernel kb sweep: " << run.status().message() << "\n";
    return 1;
  }
  const std::vector<pr::ResultRow>* rows = &run->rows;
  // KernelBench's eval_results.json per level: {"<problem_id>": [{sample_id, compiled,
  // correctness, metadata, runtime, runtime_stats}, ...]}, plus the strict columns beside.
  std::map<int, json> eval;
  std::vector<kernelbench::SampleEval> evals;
  kernelbench::VerdictTally verdicts;
  for (const auto& r : *rows) {
    if (!r.kernelbench) continue;
    const pr::KernelBenchVerdict& kb = *r.kernelbench;
    const pr::KernelBenchTaskRow& task = task_of(kb);
    const bool compiled = kb.compiled.value_or(false), correct = kb.correctness.value_or(false);
    const double runtime = kb.runtime_ms.value_or(-1.0);
    json e = {{"sample_id", task.sample_id},
              {"compiled", compiled},
              {"correctness", correct},
              {"metadata", kb.metadata.value_or(json::object())},
              {"runtime", runtime},
              {"runtime_stats", kb.runtime_stats.value_or(json::object())},
              {"status", r.correctness},
              {"strict", kb.strict.value_or(json::object())},
              {"judge", kb.judge.value_or(json())},
              {"witness", kb.witness.value_or(json())}};
    eval[task.level][std::to_string(task.problem_id)].push_back(e);
    const json strict = kb.strict.value_or(json()), judge = kb.judge.value_or(json()),
               witness = kb.witness.value_or(json());
    verdicts.add(kb.verdict.value_or(r.correctness), kernelbench::strict_failures(strict, judge, witness),
                 strict.is_object() && !strict.empty());
    evals.push_back(
        {task.level, task.problem_id, task.problem_name, task.sample_id, r.gpu, compiled, correct, runtime});
  }
  for (const auto& [level, e] : eval) {
    const fs::path p = fs::path(a.out) / ("level" + std::to_string(level)) / "eval_results.json";
    if (Status s = write_json(p, e); !s.ok()) {
      std::cerr << "autokernel kb sweep: " << s.message() << "\n";
      return 1;
    }
  }
  // Baselines: every KernelBench baseline the farm has measured.
  CoordinatorClient client(c.endpoint, std::chrono::milliseconds(c.timeout_ms), c.curve);
  auto all = client.results(protocol::ResultsQuery{"", "PASS", "kernelbench", "", ""});
  if (!all.ok()) {
    std::cerr << "autokernel kb sweep: " << all.status().message() << "\n";
    return 1;
  }
  auto baselines = farm_baselines(all->rows);
  // Then the files' baselines, for what the farm has not measured itself.
  add_file_baselines(baselines, a.baseline_files, *file_baselines);
  // Scores cover the selected problems: a sweep of level 1 gives level 1's fast_p over all its
  // problems with a baseline, and no rows for other levels the farm or a file happens to hold.
  keep_selected(baselines, *sel);
  print_verdicts(verdicts);
  std::printf("samples: %zu of %lld, wall %.1f s (campaign %s%s), baselines known: %zu\n", evals.size(),
              static_cast<long long>(run->jobs), run->wall_s, run->id.c_str(), run->complete ? "" : ", not complete",
              baselines.size());
  const json scores = print_scores(evals, baselines);
  const fs::path sp = fs::path(a.out) / "scores.json";
  if (Status s = write_json(sp, scores); !s.ok()) {
    std::cerr << "autokernel kb sweep: " << s.message() << "\n";
    return 1;
  }
  std::cout << "wrote " << sp.string() << " and eval_results.json per level under " << a.out << "\n";
  return run->complete ? 0 : 1;
}

namespace {

// The level of an eval_results file: the last "level<N>" (or "level_<N>") in its path, as a sweep
// writes it (<out>/level1/eval_results.json) or as the results folders keep it
// (eval_results-builtin-level1.json).
std::optional<int> level_of_path(const std::string& path) {
  std::optional<int> level;
  for (size_t at = path.find("level"); at != std::string::npos; at = path.find("level", at + 1)) {
    size_t i = at + 5;
    if (i < path.size() && path[i] == '_') ++i;
    size_t j = i;
    while (j < path.size() && std::isdigit(static_cast<unsigned char>(path[j]))) ++j;
    if (j > i && j - i < 4) level = std::stoi(path.substr(i, j - i));
  }
  return level;
}

// A sample's verdict as a file tells it, for the summary: KernelBench's fields and, in files that
// kb sweep wrote, the strict checks and the judge.
struct FileVerdict {
  int level = 0;
  int problem_id = 0;
  std::string verdict;
  std::vector<std::string> strict_failures;
  bool strict_ran = false;
};

// One eval_results.json: {"<problem_id>": [entry, ...]} as kb sweep writes it, or {"<problem_id>":
// {"<sample_id>": entry}} as KernelBench's scripts do; entry: {sample_id, compiled, correctness,
// runtime (ms), metadata: {hardware}}, and in files kb sweep wrote "strict" and "judge". Each
// sample's verdict also goes to `verdicts`.
Status read_eval_file(const std::string& path, int level, const std::map<std::pair<int, int>, std::string>& names,
                      const std::string& gpu_model, std::vector<kernelbench::SampleEval>& out,
                      std::vector<FileVerdict>& verdicts) {
  std::ifstream in(path);
  if (!in) return Status::not_found("cannot read " + path);
  const json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return Status::invalid(path + ": not a JSON object");
  const size_t first = out.size();
  for (const auto& [pid_text, samples] : doc.items()) {
    int pid = 0;
    if (!kernelbench::parse_int(pid_text, &pid))
      return Status::invalid(path + ": key '" + pid_text + "' is not a problem id");
    const auto name = names.find({level, pid});
    if (name == names.end())
      return Status::invalid(fmt::format("{}: level {} problem {} is not in --kernelbench", path, level, pid));
    std::vector<std::pair<std::string, json>> entries;
    if (samples.is_array()) {
      for (const auto& e : samples) entries.emplace_back("", e);
    } else if (samples.is_object()) {
      for (const auto& [k, e] : samples.items()) entries.emplace_back(k, e);
    } else {
      return Status::invalid(fmt::format("{}: problem {}: neither a list nor an object of samples", path, pid));
    }
    for (const auto& [key, e] : entries) {
      if (!e.is_object()) return Status::invalid(fmt::format("{}: problem {}: a sample is not an object", path, pid));
      int sample = 0;
      if (e.contains("sample_id")) {
        const json& id = e["sample_id"];
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > 999999)
          return Status::invalid(fmt::format("{}: problem {}: sample_id {} is not a sample number", path, pid, id.dump()));
        sample = static_cast<int>(id.get<int64_t>());
      } else if (!kernelbench::parse_int(key, &sample)) {
        return Status::invalid(fmt::format("{}: problem {}: a sample without a sample_id", path, pid));
      }
      for (const char* field : {"compiled", "correctness"})
        if (e.contains(field) && !e[field].is_boolean())
          return Status::invalid(fmt::format("{}: problem {} sample {}: {} is {}, not true or false", path, pid, sample,
                                             field, e[field].dump()));
      std::string gpu;
      if (e.contains("metadata") && e["metadata"].is_object() && e["metadata"].value("hardware", json()).is_string())
        gpu = e["metadata"]["hardware"].get<std::string>();
      const double runtime = e.value("runtime", json(-1.0)).is_number() ? e["runtime"].get<double>() : -1.0;
      out.push_back({level, pid, name->second, sample, gpu, e.value("compiled", false), e.value("correctness", false),
                     runtime});
      const json meta = e.value("metadata", json::object());
      const json strict = e.value("strict", json()), judge = e.value("judge", json()),
                 witness = e.value("witness", json());
      verdicts.push_back({level, pid,
                          !out.back().compiled                                 ? "compile_failure"
                          : meta.is_object() && meta.contains("runtime_error") ? "runtime_error"
                          : out.back().correct                                 ? "correct"
                                                                               : "incorrect",
                          kernelbench::strict_failures(strict, judge, witness), strict.is_object() && !strict.empty()});
    }
  }
  // A sample that never ran (a timeout, a crash) names no hardware: it ran where the file's other
  // samples did, or on --gpu-model.
  std::set<std::string> named;
  for (size_t i = first; i < out.size(); ++i)
    if (!out[i].gpu_model.empty()) named.insert(out[i].gpu_model);
  for (size_t i = first; i < out.size(); ++i) {
    if (!out[i].gpu_model.empty()) continue;
    if (named.size() == 1) {
      out[i].gpu_model = *named.begin();
    } else if (!gpu_model.empty()) {
      out[i].gpu_model = gpu_model;
    } else {
      return Status::invalid(fmt::format("{}: problem {} sample {}: no metadata.hardware and the file names {} GPU "
                                         "models; give --gpu-model",
                                         path, out[i].problem_id, out[i].sample_id, named.size()));
    }
  }
  return Status::ok_status();
}

}  // namespace

int kb_score(const KbArgs& a) {
  auto sel = selection_of(a);
  if (!sel.ok()) {
    std::cerr << "autokernel kb score: " << sel.status().message() << "\n";
    return 2;
  }
  if (a.baseline_files.empty()) {
    std::cerr << "autokernel kb score: give the baselines to score against (--baselines FILE, repeatable)\n";
    return 2;
  }
  // Only the levels that have an eval_results file are scored.
  std::set<int> levels;
  std::vector<std::pair<std::string, int>> files;
  for (const auto& f : a.eval_files) {
    const auto level = level_of_path(f);
    if (!level || *level < 1 || *level > 4) {
      std::cerr << "autokernel kb score: " << f << ": no level<N> of KernelBench's 1-4 in its path, so its level is unknown\n";
      return 2;
    }
    if (!sel->levels.empty() && !sel->levels.count(*level)) continue;
    levels.insert(*level);
    files.emplace_back(f, *level);
  }
  if (files.empty()) {
    std::cerr << "autokernel kb score: no --eval-results file of the selected levels\n";
    return 2;
  }
  sel->levels = levels;
  // Every problem of those levels, for its name; --ids picks among them below.
  kernelbench::Selection whole_levels;
  whole_levels.levels = levels;
  auto problems = kernelbench::load_problems(a.kernelbench, whole_levels, a.python);
  if (!problems.ok()) {
    std::cerr << "autokernel kb score: " << problems.status().message() << "\n";
    return 2;
  }
  std::map<std::pair<int, int>, std::string> names;
  for (const auto& p : *problems) names[{p.level, p.problem_id}] = p.name;
  const std::string gpu = a.gpu_models.size() == 1 ? a.gpu_models.front() : "";
  std::vector<kernelbench::SampleEval> evals;
  std::vector<FileVerdict> file_verdicts;
  for (const auto& [f, level] : files) {
    Status s = Status::ok_status();
    try {
      s = read_eval_file(f, level, names, gpu, evals, file_verdicts);
    } catch (const json::exception& e) {  // a field of another type than KernelBench writes
      s = Status::invalid(f + ": " + e.what());
    }
    if (!s.ok()) {
      std::cerr << "autokernel kb score: " << s.message() << "\n";
      return 2;
    }
  }
  std::erase_if(evals, [&](const kernelbench::SampleEval& e) { return !sel->matches(e.level, e.problem_id); });
  auto loaded = load_baseline_files(a);
  if (!loaded.ok()) {
    std::cerr << "autokernel kb score: " << loaded.status().message() << "\n";
    return 2;
  }
  std::vector<kernelbench::Baseline> baselines;
  add_file_baselines(baselines, a.baseline_files, *loaded);
  keep_selected(baselines, *sel);
  kernelbench::VerdictTally verdicts;
  for (const auto& v : file_verdicts)
    if (sel->matches(v.level, v.problem_id)) verdicts.add(v.verdict, v.strict_failures, v.strict_ran);
  print_verdicts(verdicts);
  std::cout << "samples: " << evals.size() << " from " << files.size() << " file(s), baselines: " << baselines.size()
            << "\n";
  const json scores = print_scores(evals, baselines);
  if (!a.score_json.empty()) {
    if (Status s = write_json(a.score_json, scores); !s.ok()) {
      std::cerr << "autokernel kb score: " << s.message() << "\n";
      return 1;
    }
    std::cout << "wrote " << a.score_json << "\n";
  }
  return 0;
}

}  // namespace ak::cli
