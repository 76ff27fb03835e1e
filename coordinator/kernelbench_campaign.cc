#include "coordinator/kernelbench_campaign.h"

#include <map>
#include <set>

#include "common/hash.h"

namespace ak {

using nlohmann::json;

namespace {

const std::set<std::string> kKeys = {"kind",     "name",       "task",        "backend",  "gpu_models",
                                     "precision", "seed",      "num_correct_trials", "num_perf_trials",
                                     "strict",   "switches",   "timeout_ms",  "baselines", "problems",
                                     "samples",  "description", "tag"};

Status check_keys(const json& obj, const std::set<std::string>& keys, const std::string& where) {
  return ak::check_keys(obj, keys, where, "coordinator/kernelbench_campaign.h");
}

std::string pad3(int v) {
  std::string s = std::to_string(v);
  return s.size() >= 3 ? s : std::string(3 - s.size(), '0') + s;
}

}  // namespace

namespace {
Status check_job_count(int64_t n, const PlanLimits& limits) {
  if (n <= limits.max_jobs) return {};
  return Status::invalid("KernelBench campaign plans " + std::to_string(n) +
                         " jobs; this coordinator accepts at most " + std::to_string(limits.max_jobs) +
                         " per campaign (--max-jobs-per-submit); split it");
}
}  // namespace

Result<PlannedCampaign> plan_kernelbench_campaign(const json& doc, const std::string& campaign_id, int64_t wall_ms,
                                                  const PlanLimits& limits) {
  if (Status s = check_keys(doc, kKeys, "a KernelBench campaign"); !s.ok()) return s;
  try {
    const std::string task = doc.value("task", "baseline");
    if (task != "baseline" && task != "candidates")
      return Status::invalid("'task' must be \"baseline\" or \"candidates\", got \"" + task + "\"");
    const std::string b = doc.value("backend", "cuda");
    auto backend = parse_backend(b);
    if (!backend || *backend == Backend::kTriton)
      return Status::invalid("'backend' (the workers that run it) must be cuda or cpu, got \"" + b + "\"");
    std::vector<std::string> models;
    if (doc.contains("gpu_models")) models = doc["gpu_models"].get<std::vector<std::string>>();
    if (models.empty()) models.push_back("");
    if (*backend == Backend::kCpu && (models.size() != 1 || !models[0].empty()))
      return Status::invalid("'gpu_models' names GPU models; a cpu campaign runs on cpu workers");

    KernelBenchTask base;
    base.precision = doc.value("precision", base.precision);
    if (base.precision != "fp32" && base.precision != "fp16" && base.precision != "bf16")
      return Status::invalid("'precision' must be fp32, fp16 or bf16, got \"" + base.precision + "\"");
    base.seed = doc.value("seed", base.seed);
    base.num_correct_trials = doc.value("num_correct_trials", base.num_correct_trials);
    base.num_perf_trials = doc.value("num_perf_trials", base.num_perf_trials);
    if (base.num_correct_trials < 1 || base.num_perf_trials < 1)
      return Status::invalid("'num_correct_trials' and 'num_perf_trials' must be >= 1");
    base.strict = doc.value("strict", base.strict);
    base.switches = doc.value("switches", json::object());
    if (!base.switches.is_object()) return Status::invalid("'switches' must be an object");
    auto timeout = read_timeout_ms(doc, 180'000);
    if (!timeout.ok()) return timeout.status();
    const int64_t timeout_ms = *timeout;

    std::map<std::pair<int, int>, json> problems;
    if (!doc.contains("problems") || !doc["problems"].is_array() || doc["problems"].empty())
      return Status::invalid("a KernelBench campaign needs 'problems': [{level, problem_id, name, code}, ...]");
    for (const auto& p : doc["problems"]) {
      if (Status s = check_keys(p, {"level", "problem_id", "name", "code"}, "a problem"); !s.ok()) return s;
      const int level = p.at("level").get<int>(), id = p.at("problem_id").get<int>();
      if (level < 1 || id < 1) return Status::invalid("a problem needs level >= 1 and problem_id >= 1");
      if (p.at("name").get<std::string>().empty() || p.at("code").get<std::string>().empty())
        return Status::invalid("problem level " + std::to_string(level) + " id " + std::to_string(id) +
                               " needs a name and its code");
      if (!problems.emplace(std::make_pair(level, id), p).second)
        return Status::invalid("problem level " + std::to_string(level) + " id " + std::to_string(id) + " is listed twice");
    }

    PlannedCampaign plan;
    auto add = [&](const json& p, KernelBenchTask t, const std::string& suffix, const std::string& source) {
      for (size_t g = 0; g < models.size(); ++g) {
        JobSpec j;
        j.campaign_id = campaign_id;
        j.job_id = campaign_id + "-kb-l" + std::to_string(p["level"].get<int>()) + "-p" +
                   pad3(p["problem_id"].get<int>()) + "-" + suffix + (models.size() > 1 ? "-g" + std::to_string(g) : "");
        j.kernel_type = "kernelbench";
        if (!source.empty()) {
          j.source_hash = xxh64_hex(source);
          plan.sources.emplace(j.source_hash, source);
        }
        j.dtype = base.precision == "fp16" ? DType::kF16 : base.precision == "bf16" ? DType::kBF16 : DType::kF32;
        j.requires_.backend = *backend;
        j.requires_.gpu_model = models[g];
        j.timeout_ms = timeout_ms;
        j.tag = doc.value("tag", "kernelbench");
        j.description = "level " + std::to_string(p["level"].get<int>()) + " " + p["name"].get<std::string>() + " " + suffix;
        t.level = p["level"].get<int>();
        t.problem_id = p["problem_id"].get<int>();
        t.problem_name = p["name"].get<std::string>();
        t.problem_code = p["code"].get<std::string>();
        j.kernelbench = t;
        plan.jobs.push_back(std::move(j));
      }
    };
    if (task == "baseline") {
      std::vector<std::string> modes = doc.value("baselines", std::vector<std::string>{"eager", "compile"});
      if (modes.empty()) return Status::invalid("'baselines' is empty; give eager and/or compile");
      if (Status st = check_job_count(int64_t(problems.size() * modes.size() * models.size()), limits); !st.ok())
        return st;
      for (const auto& [key, p] : problems)
        for (const auto& m : modes) {
          KernelBenchTask t = base;
          t.mode = "baseline";
          if (m == "eager") {
            t.compile = false;
          } else if (m == "compile") {
            t.compile = true;
          } else if (m.rfind("compile-", 0) == 0) {
            t.compile = true;
            t.compile_mode = m.substr(8);
          } else {
            return Status::invalid("unknown baseline '" + m + "'; expected eager, compile or compile-<inductor mode>");
          }
          add(p, t, m, "");
        }
    } else {
      if (!doc.contains("samples") || !doc["samples"].is_array() || doc["samples"].empty())
        return Status::invalid("a candidates campaign needs 'samples': [{level, problem_id, sample_id, code, backend}]");
      if (Status st = check_job_count(int64_t(doc["samples"].size() * models.size()), limits); !st.ok()) return st;
      for (const auto& s : doc["samples"]) {
        if (Status st = check_keys(s, {"level", "problem_id", "sample_id", "code", "backend"}, "a sample"); !st.ok())
          return st;
        const int level = s.at("level").get<int>(), id = s.at("problem_id").get<int>();
        auto it = problems.find({level, id});
        if (it == problems.end())
          return Status::invalid("sample " + std::to_string(s.value("sample_id", 0)) + " of level " +
                                 std::to_string(level) + " problem " + std::to_string(id) +
                                 " has no problem in 'problems'");
        KernelBenchTask t = base;
        t.mode = "candidate";
        t.sample_id = s.value("sample_id", 0);
        t.backend = s.value("backend", std::string("cuda"));
        if (t.backend != "cuda" && t.backend != "triton" && t.backend != "torch")
          return Status::invalid("a sample's backend must be cuda, triton or torch, got \"" + t.backend + "\"");
        add(it->second, t, "s" + std::to_string(t.sample_id), s.at("code").get<std::string>());
      }
    }
    plan.record =
        campaign_record(doc, campaign_id, doc.value("name", "kernelbench " + task), plan.jobs.size(), wall_ms);
    return plan;
  } catch (const json::exception& e) {
    return Status::invalid(std::string("KernelBench campaign does not match its schema: ") + e.what());
  }
}

}  // namespace ak
