#include "kernelbench/score.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <tuple>
#include <utility>

namespace ak::kernelbench {
namespace {

// Hugging Face's KernelBench dataset names problems without ".py"; the baseline JSON keys them
// with it. Both sides are compared without the suffix.
std::string problem_key(std::string_view name) {
  constexpr std::string_view kSuffix = ".py";
  if (name.size() >= kSuffix.size() && name.substr(name.size() - kSuffix.size()) == kSuffix)
    name.remove_suffix(kSuffix.size());
  return std::string(name);
}

// GPU models arrive as "NVIDIA H200" from one tool and "nvidia h200" from another.
std::string gpu_key(std::string_view model) {
  std::string out(model);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool usable_time(double ms) { return std::isfinite(ms) && ms > 0; }

// A correct sample must carry a timing to be compared with the baseline; one that does not
// (runtime_ms not finite or not positive) is malformed and is scored as incorrect rather than as
// infinitely fast.
bool usable_correct(const SampleEval& s) { return s.correct && usable_time(s.runtime_ms); }

// (level, problem without ".py", lowercased GPU model): what an evaluation and a baseline share.
using ProblemKey = std::tuple<int, std::string, std::string>;

// (level, lowercased GPU model, mode): one LevelScore.
using GroupKey = std::tuple<int, std::string, std::string>;

// The outcome of one problem, after picking its sample.
struct Outcome {
  bool compiled = false;
  bool correct = false;
  double runtime_ms = 0;  // meaningful when correct
};

// Picks the sample that stands for a problem: sample_id 0 (the first one seen, should an
// evaluation be repeated), or with best_sample the fastest correct sample, compiled when any
// sample compiled.
Outcome pick(const std::vector<const SampleEval*>& samples, bool best_sample) {
  Outcome out;
  if (!best_sample) {
    for (const SampleEval* s : samples) {
      if (s->sample_id != 0) continue;
      out.compiled = s->compiled;
      out.correct = usable_correct(*s);
      out.runtime_ms = out.correct ? s->runtime_ms : 0;
      return out;
    }
    return out;  // no sample 0: neither compiled nor correct
  }
  for (const SampleEval* s : samples) {
    out.compiled = out.compiled || s->compiled;
    if (!usable_correct(*s)) continue;
    if (!out.correct || s->runtime_ms < out.runtime_ms) out.runtime_ms = s->runtime_ms;
    out.correct = true;
  }
  return out;
}

// "0.0", "0.5", "1.25", "3.0": the shortest round-trip form with at least one decimal, as
// Python's str(float) writes KernelBench's threshold keys.
std::string threshold_key(double p) {
  std::array<char, 64> buf{};
  auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), p);
  std::string s(buf.data(), ec == std::errc() ? end : buf.data());
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // 'n': inf, nan
  return s;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

}  // namespace

std::vector<LevelScore> score(const std::vector<SampleEval>& samples, const std::vector<Baseline>& baselines,
                              const ScoreOptions& options) {
  std::map<ProblemKey, std::vector<const SampleEval*>> evals;
  for (const SampleEval& s : samples) evals[{s.level, problem_key(s.problem_name), gpu_key(s.gpu_model)}].push_back(&s);

  struct Group {
    std::string gpu_model;  // as the first baseline of the group spells it
    std::string mode;
    int level = 0;
    std::map<std::string, double> baseline_ms;  // problem key -> baseline [ms]; first one wins
  };
  std::map<GroupKey, Group> groups;
  for (const Baseline& b : baselines) {
    // A baseline without a usable time cannot give a speedup; it is not a baseline.
    if (!usable_time(b.mean_ms)) continue;
    auto [it, inserted] = groups.try_emplace(GroupKey{b.level, gpu_key(b.gpu_model), b.mode});
    if (inserted) {
      it->second.gpu_model = b.gpu_model;
      it->second.mode = b.mode;
      it->second.level = b.level;
    }
    it->second.baseline_ms.try_emplace(problem_key(b.problem_name), b.mean_ms);
  }

  std::vector<LevelScore> scores;
  scores.reserve(groups.size());
  for (const auto& [key, group] : groups) {
    LevelScore ls;
    ls.level = group.level;
    ls.gpu_model = group.gpu_model;
    ls.baseline_mode = group.mode;
    ls.problems = static_cast<int64_t>(group.baseline_ms.size());

    std::vector<double> speedups;  // of correct problems
    static const std::vector<const SampleEval*> kNone;
    for (const auto& [name, baseline_ms] : group.baseline_ms) {
      auto it = evals.find(ProblemKey{group.level, name, std::get<1>(key)});
      const Outcome o = pick(it == evals.end() ? kNone : it->second, options.best_sample);
      ls.compiled += o.compiled ? 1 : 0;
      if (!o.correct) continue;
      ++ls.correct;
      speedups.push_back(baseline_ms / o.runtime_ms);
    }

    const double n = static_cast<double>(ls.problems);
    ls.compilation_rate = static_cast<double>(ls.compiled) / n;
    ls.correctness_rate = static_cast<double>(ls.correct) / n;
    if (!speedups.empty()) {
      double log_sum = 0;
      for (double s : speedups) log_sum += std::log(s);
      ls.geo_mean_speedup = std::exp(log_sum / static_cast<double>(speedups.size()));
    }
    for (double p : options.thresholds) {
      const auto faster = std::count_if(speedups.begin(), speedups.end(), [p](double s) { return s > p; });
      ls.fast_p[p] = static_cast<double>(faster) / n;
    }
    scores.push_back(std::move(ls));
  }
  // The map already orders by (level, lowercased model, mode), which is the documented order up to
  // the case of the model's spelling.
  return scores;
}

nlohmann::json score_json(const std::vector<LevelScore>& scores) {
  nlohmann::json rows = nlohmann::json::array();
  for (const LevelScore& s : scores) {
    nlohmann::json fast_p = nlohmann::json::object();
    for (const auto& [p, v] : s.fast_p) fast_p[threshold_key(p)] = v;
    rows.push_back({
        {"level", s.level},
        {"gpu_model", s.gpu_model},
        {"baseline", s.baseline_mode},
        {"problems", s.problems},
        {"compiled", s.compiled},
        {"correct", s.correct},
        {"compilation_rate", s.compilation_rate},
        {"correctness_rate", s.correctness_rate},
        {"geo_mean_speedup", s.geo_mean_speedup},
        {"fast_p", std::move(fast_p)},
    });
  }
  return nlohmann::json{{"scores", std::move(rows)}};
}

std::string score_table(const std::vector<LevelScore>& scores) {
  std::set<double> thresholds;
  for (const LevelScore& s : scores)
    for (const auto& [p, v] : s.fast_p) thresholds.insert(p);

  std::vector<std::string> header = {"level", "gpu model", "baseline", "n", "compiled", "correct", "geomean"};
  for (double p : thresholds) header.push_back("fast_" + threshold_key(p));

  std::vector<std::vector<std::string>> rows;
  for (const LevelScore& s : scores) {
    std::vector<std::string> row = {std::to_string(s.level),    s.gpu_model,
                                    s.baseline_mode,            std::to_string(s.problems),
                                    std::to_string(s.compiled), std::to_string(s.correct),
                                    fixed(s.geo_mean_speedup, 3)};
    for (double p : thresholds) {
      auto it = s.fast_p.find(p);
      row.push_back(it == s.fast_p.end() ? "-" : fixed(it->second, 3));
    }
    rows.push_back(std::move(row));
  }

  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  // Text columns (model, baseline) read left-aligned; numbers right-aligned.
  auto left_aligned = [](size_t c) { return c == 1 || c == 2; };
  std::ostringstream out;
  auto write = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c > 0) line += "  ";
      const std::string pad(width[c] - cells[c].size(), ' ');
      line += left_aligned(c) ? cells[c] + pad : pad + cells[c];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << '\n';
  };
  write(header);
  for (const auto& row : rows) write(row);
  return out.str();
}

namespace {
const std::string kEagerFile = "baseline_time_torch.json", kCompileFilePrefix = "baseline_time_torch_compile_inductor_";
}  // namespace

Result<std::string> canonical_baseline_mode(const std::string& mode) {
  if (mode == "eager" || mode == "compile") return mode;
  if (mode.starts_with("compile-") && mode.size() > 8) return mode == "compile-default" ? "compile" : mode;
  return Status::invalid("'" + mode + "' is not eager, compile or compile-<mode>");
}

std::string baseline_file_name(const std::string& mode) {
  if (mode == "eager") return kEagerFile;
  return kCompileFilePrefix + (mode == "compile" ? "default" : mode.substr(8)) + ".json";
}

Result<std::vector<Baseline>> load_baseline_file(const std::string& path, const std::string& gpu_model) {
  const std::string file = std::filesystem::path(path).filename().string();
  const std::string& eager = kEagerFile;
  const std::string& compile = kCompileFilePrefix;
  std::string mode;
  if (file == eager) {
    mode = "eager";
  } else if (file.starts_with(compile) && file.ends_with(".json") && file.size() > compile.size() + 5) {
    const std::string m = file.substr(compile.size(), file.size() - compile.size() - 5);
    mode = m == "default" ? "compile" : "compile-" + m;
  } else {
    return Status::invalid(path + ": not a KernelBench baseline file name (baseline_time_torch.json or "
                           "baseline_time_torch_compile_inductor_<mode>.json)");
  }
  std::ifstream in(path);
  if (!in) return Status::not_found("cannot read " + path);
  const nlohmann::json doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return Status::invalid(path + ": not a JSON object of levels");
  std::vector<Baseline> out;
  for (const auto& [level_key, entries] : doc.items()) {
    int level = 0;
    const std::string_view digits = std::string_view(level_key).substr(std::min<size_t>(5, level_key.size()));
    const auto parsed = std::from_chars(digits.data(), digits.data() + digits.size(), level);
    if (!level_key.starts_with("level") || parsed.ec != std::errc() || parsed.ptr != digits.data() + digits.size() ||
        level < 1 || !entries.is_object())
      return Status::invalid(path + ": \"" + level_key + "\" is not a level (\"level1\": {problem: stats})");
    for (const auto& [name, stats] : entries.items()) {
      if (!stats.is_object() || !stats.contains("mean") || !stats["mean"].is_number() || stats["mean"].get<double>() <= 0)
        return Status::invalid(path + ": " + level_key + "/" + name + " has no positive \"mean\"");
      std::string gpu = stats.contains("hardware") && stats["hardware"].is_string() ? stats["hardware"].get<std::string>() : "";
      if (gpu.empty()) gpu = gpu_model;
      if (gpu.empty())
        return Status::invalid(path + ": " + level_key + "/" + name +
                               " names no \"hardware\"; say which GPU model the file was measured on");
      out.push_back({level, name, gpu, mode, stats["mean"].get<double>()});
    }
  }
  return out;
}

std::vector<std::string> strict_failures(const nlohmann::json& strict, const nlohmann::json& judge,
                                         const nlohmann::json& witness) {
  std::vector<std::string> out;
  auto is_true = [](const nlohmann::json& o, const char* k) {
    return o.contains(k) && o[k].is_boolean() && o[k].get<bool>();
  };
  auto non_empty = [](const nlohmann::json& o, const char* k) {
    return o.contains(k) && (o[k].is_array() || o[k].is_object()) && !o[k].empty();
  };
  if (strict.is_object()) {
    for (const char* k : {"input_mutation", "output_poison", "side_stream", "rotation_suspect"})
      if (is_true(strict, k)) out.push_back(k);
    if (non_empty(strict, "monkeypatch")) out.push_back("monkeypatch");
    if (strict.contains("static_scan") && strict["static_scan"].is_object() &&
        non_empty(strict["static_scan"], "errors"))
      out.push_back("static_scan");
    if (non_empty(strict, "check_errors")) out.push_back("check_errors");
  }
  if (judge.is_object() && judge.contains("strict_correct") && judge["strict_correct"].is_boolean() &&
      !judge["strict_correct"].get<bool>())
    out.push_back("judge");
  if (witness.is_object() && witness.contains("verdict") && witness["verdict"] == "fail") out.push_back("witness");
  return out;
}

void VerdictTally::add(const std::string& verdict, const std::vector<std::string>& failures, bool strict_ran) {
  if (verdict != "correct") {
    ++verdicts[verdict];
    return;
  }
  if (failures.empty()) {
    ++verdicts["correct"];
    if (!strict_ran) ++unchecked;
    return;
  }
  ++strict_failed;
  for (const auto& f : failures) ++failed_checks[f];
}

std::string VerdictTally::line() const {
  std::string out;
  auto add = [&](const std::string& part) { out += (out.empty() ? "" : ", ") + part; };
  const auto correct = verdicts.find("correct");
  if (correct != verdicts.end() || strict_failed > 0) {
    const int64_t n = correct == verdicts.end() ? 0 : correct->second;
    add("correct " + std::to_string(n) +
        (unchecked > 0 ? " (" + std::to_string(unchecked) + " without strict checks)" : ""));
  }
  if (strict_failed > 0) {
    std::string checks;
    for (const auto& [check, n] : failed_checks)
      checks += (checks.empty() ? "" : ", ") + check + " " + std::to_string(n);
    add("strict-failed " + std::to_string(strict_failed) + " (" + checks + ")");
  }
  for (const auto& [v, n] : verdicts)
    if (v != "correct") add(v + " " + std::to_string(n));
  return out.empty() ? "none" : out;
}

}  // namespace ak::kernelbench
