#include "kernelbench/bridge.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "common/file.h"
#include "common/hash.h"
#include "common/process.h"
#include "kernelbench/harness_source.h"

namespace ak::kernelbench {

namespace fs = std::filesystem;
using nlohmann::json;

// Declared in bridge.h for the CLI; common/hash.h holds the one implementation.
std::string xxh64_hex(const std::string& text) { return ak::xxh64_hex(text); }

bool parse_int(const std::string& s, int* out) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  *out = std::stoi(s);
  return true;
}

std::optional<int> problem_id_of(const std::string& file_name) {
  int id = 0;
  const auto us = file_name.find('_');
  if (us == std::string::npos || !parse_int(file_name.substr(0, us), &id)) return std::nullopt;
  return id;
}

bool Selection::matches(int level, int problem_id) const {
  if (!levels.empty() && !levels.count(level)) return false;
  if (!ids.empty() && !ids.count(problem_id)) return false;
  return true;
}

Result<std::set<int>> parse_id_ranges(const std::string& text) {
  std::set<int> out;
  std::stringstream ss(text);
  std::string piece;
  while (std::getline(ss, piece, ',')) {
    piece.erase(std::remove(piece.begin(), piece.end(), ' '), piece.end());
    if (piece.empty()) continue;
    const auto dash = piece.find('-');
    int a = 0, b = 0;
    const bool ok = dash == std::string::npos
                        ? parse_int(piece, &a) && (b = a, true)
                        : parse_int(piece.substr(0, dash), &a) && parse_int(piece.substr(dash + 1), &b);
    if (!ok || a < 1 || b < a || b - a > 100000)
      return Status::invalid("bad problem id range '" + piece + "'; expected ids like 1-10,15,20-22");
    for (int i = a; i <= b; ++i) out.insert(i);
  }
  return out;
}

Result<std::string> find_levels_dir(const std::string& root) {
  for (const fs::path& p : {fs::path(root) / "KernelBench", fs::path(root)}) {
    std::error_code ec;
    for (int l = 1; l <= 4; ++l)
      if (fs::is_directory(p / ("level" + std::to_string(l)), ec)) return p.string();
  }
  return Status::not_found("no KernelBench problems under " + root +
                           ": expected level1/ ... there or in its KernelBench/ folder (a checkout of "
                           "github.com/ScalingIntelligence/KernelBench), or the Hugging Face dataset's "
                           "level_<N>-<shard>-of-<shards>.parquet files below it");
}

bool has_hf_dataset(const std::string& root) {
  if (find_levels_dir(root).ok()) return false;
  static const std::regex split(R"(^level_\d+-\d+-of-\d+\.parquet$)");
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (it->is_regular_file(ec) && std::regex_match(it->path().filename().string(), split)) return true;
  return false;
}

Result<std::vector<Problem>> load_hf_dataset(const std::string& root, const Selection& sel, const std::string& python) {
  ChildProcess::Options o;
  o.capture_stdout = true;  // stderr (the reason of a failure) goes to ours
  auto child = ChildProcess::spawn({python, "-c", std::string(kHfDatasetScript), root}, o);
  if (!child.ok()) return Status::unavailable("cannot run " + python + " for the dataset's files: " + child.status().message());
  auto line = child->read_line(std::chrono::minutes(5));
  if (line.ok() && !*line) {
    child->kill_group();
    return Status::timed_out("reading the Hugging Face dataset's files under " + root + " with " + python +
                             " took over 5 minutes; stopped");
  }
  const int rc = child->wait();  // it has printed its line or closed stdout: it is exiting
  if (rc != 0 || !line.ok())
    return Status::invalid("reading the Hugging Face dataset's files under " + root + " with " + python +
                           " failed (exit " + std::to_string(rc) + "; its reason is above)");
  const json doc = json::parse(**line, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("problems") || !doc["problems"].is_array())
    return Status::internal("hf_dataset.py printed no problems document");
  std::vector<Problem> out;
  std::map<std::pair<int, int>, std::string> seen;
  for (const auto& r : doc["problems"]) {
    Problem p;
    p.level = r.value("level", 0);
    p.problem_id = r.value("problem_id", 0);
    if (!sel.matches(p.level, p.problem_id)) continue;
    p.name = r.value("name", "");
    p.path = r.value("file", "");
    auto [it, fresh] = seen.emplace(std::make_pair(p.level, p.problem_id), p.path + " (" + p.name + ")");
    if (!fresh)
      return Status::invalid("two dataset rows for level " + std::to_string(p.level) + " id " +
                             std::to_string(p.problem_id) + ": " + it->second + " and " + p.path + " (" + p.name + ")");
    p.code = r.value("code", "");
    p.code_hash = xxh64_hex(p.code);
    out.push_back(std::move(p));
  }
  std::sort(out.begin(), out.end(), [](const Problem& a, const Problem& b) {
    return std::tie(a.level, a.problem_id) < std::tie(b.level, b.problem_id);
  });
  return out;
}

Result<std::vector<Problem>> load_problems(const std::string& root, const Selection& sel, const std::string& python) {
  if (has_hf_dataset(root)) return load_hf_dataset(root, sel, python);
  auto dir = find_levels_dir(root);
  if (!dir.ok()) return dir.status();
  std::vector<Problem> out;
  std::map<std::pair<int, int>, std::string> seen;
  for (int level = 1; level <= 4; ++level) {
    const fs::path ldir = fs::path(*dir) / ("level" + std::to_string(level));
    std::error_code ec;
    if (!fs::is_directory(ldir, ec)) continue;
    if (!sel.levels.empty() && !sel.levels.count(level)) continue;
    for (const auto& entry : fs::directory_iterator(ldir, ec)) {
      const std::string file = entry.path().filename().string();
      if (!entry.is_regular_file() || entry.path().extension() != ".py") continue;
      const auto parsed_id = problem_id_of(file);
      if (!parsed_id) continue;
      const int id = *parsed_id;
      if (!sel.matches(level, id)) continue;
      auto [it, fresh] = seen.emplace(std::make_pair(level, id), entry.path().string());
      if (!fresh)
        return Status::invalid("two problem files for level " + std::to_string(level) + " id " + std::to_string(id) +
                               ": " + it->second + " and " + entry.path().string());
      auto code = read_file(entry.path().string());
      if (!code.ok()) return code.status();
      Problem p;
      p.level = level;
      p.problem_id = id;
      p.name = file;
      p.path = fs::absolute(entry.path()).string();
      p.code = std::move(*code);
      p.code_hash = xxh64_hex(p.code);
      out.push_back(std::move(p));
    }
  }
  std::sort(out.begin(), out.end(), [](const Problem& a, const Problem& b) {
    return std::tie(a.level, a.problem_id) < std::tie(b.level, b.problem_id);
  });
  return out;
}

std::optional<Generation> parse_generation_name(const std::string& file_name) {
  static const std::regex re(R"(^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$)");
  std::smatch m;
  if (!std::regex_match(file_name, m, re)) return std::nullopt;
  Generation g;
  if (!parse_int(m[1], &g.level) || !parse_int(m[2], &g.problem_id) || !parse_int(m[3], &g.sample_id))
    return std::nullopt;
  return g;
}

Result<std::vector<Generation>> load_generations(const std::string& dir, const Selection& sel) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::not_found("generations folder " + dir + " does not exist");
  std::vector<Generation> out;
  std::map<std::tuple<int, int, int>, std::string> seen;
  for (auto it = fs::recursive_directory_iterator(dir, ec); it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) return Status::unavailable("cannot list " + dir + ": " + ec.message());
    if (!it->is_regular_file()) continue;
    auto g = parse_generation_name(it->path().filename().string());
    if (!g || !sel.matches(g->level, g->problem_id)) continue;
    auto [s, fresh] = seen.emplace(std::make_tuple(g->level, g->problem_id, g->sample_id), it->path().string());
    if (!fresh)
      return Status::invalid("two generations for level " + std::to_string(g->level) + " problem " +
                             std::to_string(g->problem_id) + " sample " + std::to_string(g->sample_id) + ": " +
                             s->second + " and " + it->path().string());
    auto code = read_file(it->path().string());
    if (!code.ok()) return code.status();
    g->path = fs::absolute(it->path()).string();
    g->code = std::move(*code);
    g->code_hash = xxh64_hex(g->code);
    out.push_back(std::move(*g));
  }
  std::sort(out.begin(), out.end(), [](const Generation& a, const Generation& b) {
    return std::tie(a.level, a.problem_id, a.sample_id) < std::tie(b.level, b.problem_id, b.sample_id);
  });
  return out;
}

}  // namespace ak::kernelbench
