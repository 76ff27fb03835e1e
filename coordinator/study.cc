#include "coordinator/study.h"

#include "coordinator/campaign.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <set>

namespace ak {

using nlohmann::json;

namespace {

const std::set<std::string> kKeys = {"kind",   "name",       "strategy",        "seed",        "strategy_options",
                                     "targets", "gpu_models", "backend",         "budget",      "plateau",
                                     "roofline_fraction",     "source",          "space",       "measure",
                                     "timeout_ms", "tag",     "description"};
const std::set<std::string> kTargetKeys = {"kernel_type", "backend", "shape", "shapes",
                                           "dtype",       "dtypes",  "share", "start"};
constexpr size_t kMaxStartConfigs = 64;  // per target

Status check_keys(const json& obj, const std::set<std::string>& keys, const std::string& where) {
  return ak::check_keys(obj, keys, where, "coordinator/CAMPAIGNS.md");
}

const kernels::BackendSource* backend_source(const StudyDef& s) {
  const kernels::KernelSpec* spec = kernels::find(s.kernel_type);
  if (!spec) return nullptr;
  auto it = spec->backends.find(s.backend);
  return it == spec->backends.end() ? nullptr : &it->second;
}

const std::vector<kernels::Tunable>& space_of(const StudyCampaign& c, const StudyDef& s) {
  static const std::vector<kernels::Tunable> none;
  if (!c.space.empty() || !c.source.empty()) return c.space;
  const kernels::BackendSource* src = backend_source(s);
  return src ? src->space : none;
}

std::map<std::string, int64_t> default_of(const StudyCampaign& c, const StudyDef& s) {
  if (!c.space.empty() || !c.source.empty()) return kernels::default_config(c.space);
  const kernels::BackendSource* src = backend_source(s);
  return src ? kernels::default_config(*src, s.dtype) : std::map<std::string, int64_t>{};
}

// Launchability of a cuda configuration: threads per block and shared memory of every launch
// (dynamic, and for the starter source its static part, KernelSpec::cuda_static_shared_bytes, as
// the sandbox counts both against the limit), and for the starter source its compile-time
// constraints (KernelSpec::cuda_config_error). A custom source's static shared memory is unknown
// until it is compiled: only its dynamic part is counted.
std::function<bool(const search::Config&)> feasibility(const StudyCampaign& c, const StudyDef& s,
                                                       const SharedMemoryLimits& shared_memory) {
  const kernels::KernelSpec* spec = kernels::find(s.kernel_type);
  if (!spec || s.backend != Backend::kCuda) return {};
  const int64_t smem = shared_memory_limit(s.gpu_model, shared_memory);
  const std::vector<int64_t> shape = s.shape;
  const DType dtype = s.dtype;
  const bool starter = c.source.empty();
  const int64_t static_bytes = starter ? int64_t(spec->cuda_static_shared_bytes) : 0;
  return [spec, smem, shape, dtype, starter, static_bytes](const search::Config& config) {
    if (starter && spec->cuda_config_error && !spec->cuda_config_error(config, dtype).empty()) return false;
    auto ok = [&](const kernels::LaunchGeometry& g) {
      const uint64_t threads = uint64_t(g.block[0]) * g.block[1] * g.block[2];
      return threads >= 1 && threads <= 1024 && int64_t(g.shared_bytes) + static_bytes <= smem;
    };
    if (spec->cuda_phases > 1 && spec->cuda_phase_geometry) {
      for (int p = 0; p < spec->cuda_phases; ++p)
        if (!ok(spec->cuda_phase_geometry(config, shape, dtype, p))) return false;
      return true;
    }
    return spec->cuda_geometry ? ok(spec->cuda_geometry(config, shape, dtype)) : true;
  };
}

// A target's `start`: a list of {tunable: value} objects, each name a tunable of its space and each
// value one of that tunable's values (the rest take their defaults later, per dtype).
Result<std::vector<search::Config>> read_start(const json& target, const std::string& type,
                                               const std::vector<kernels::Tunable>& space) {
  std::vector<search::Config> out;
  if (!target.contains("start")) return out;
  const json& list = target["start"];
  if (!list.is_array() || list.size() > kMaxStartConfigs)
    return Status::invalid("target " + type + ": 'start' must be a list of at most " +
                           std::to_string(kMaxStartConfigs) + " configurations ({tunable: value} objects)");
  for (const json& item : list) {
    if (!item.is_object())
      return Status::invalid("target " + type + ": each 'start' entry must be an object of {tunable: value}");
    search::Config cfg;
    for (const auto& [name, value] : item.items()) {
      auto tunable =
          std::find_if(space.begin(), space.end(), [&](const kernels::Tunable& x) { return x.name == name; });
      if (tunable == space.end()) {
        std::string names;
        for (const auto& x : space) names += (names.empty() ? "" : ", ") + x.name;
        return Status::invalid("target " + type + ": 'start' names '" + name + "', which is not a tunable (" +
                               (names.empty() ? "it has none" : names) + ")");
      }
      if (!value.is_number_integer() ||
          std::find(tunable->values.begin(), tunable->values.end(), value.get<int64_t>()) == tunable->values.end()) {
        std::string values;
        for (int64_t v : tunable->values) values += (values.empty() ? "" : ", ") + std::to_string(v);
        return Status::invalid("target " + type + ": 'start' gives " + name + " = " + value.dump() +
                               "; its values are " + values);
      }
      cfg[name] = value.get<int64_t>();
    }
    out.push_back(std::move(cfg));
  }
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Result<std::unique_ptr<search::Strategy>> strategy_for(const StudyCampaign& c, const StudyDef& s,
                                                       const SharedMemoryLimits& shared_memory) {
  search::StrategyOptions o = c.options;
  o.feasible = feasibility(c, s, shared_memory);
  // Each study its own stream: the same campaign seed must not make every study explore alike.
  const uint64_t seed = c.seed + 0x9E3779B97F4A7C15ull * uint64_t(s.index);
  return search::make_strategy(c.strategy, space_of(c, s), seed, o);
}

}  // namespace

std::string gpu_model_key(std::string model) {
  for (char& c : model) c = char(std::tolower(static_cast<unsigned char>(c)));
  return model;
}

std::string study_job_id(const std::string& campaign_id, int study, size_t trial) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "-s%03d-%06zu", study, trial);
  return campaign_id + buf;
}

void add_shared_memory_limit(const Capabilities& worker, SharedMemoryLimits* limits) {
  if (worker.shared_memory_per_block_bytes <= 0) return;
  auto [it, added] = limits->emplace(gpu_model_key(worker.gpu_name), worker.shared_memory_per_block_bytes);
  if (!added) it->second = std::min(it->second, worker.shared_memory_per_block_bytes);
}

int64_t shared_memory_limit(const std::string& gpu_model, const SharedMemoryLimits& announced) {
  const std::string m = gpu_model_key(gpu_model);
  if (auto it = announced.find(m); it != announced.end() && it->second > 0) return it->second;
  if (m.find("h100") != std::string::npos || m.find("h200") != std::string::npos || m.find("h800") != std::string::npos)
    return 227 * 1024;
  if (m.find("a100") != std::string::npos || m.find("a800") != std::string::npos) return 163 * 1024;
  return 99 * 1024;
}

Result<StudyCampaign> parse_study_campaign(const json& doc) {
  if (Status s = check_keys(doc, kKeys, "a study campaign"); !s.ok()) return s;
  try {
    StudyCampaign c;
    c.name = doc.value("name", "study");
    c.strategy = doc.value("strategy", c.strategy);
    const auto names = search::strategy_names();
    if (std::find(names.begin(), names.end(), c.strategy) == names.end()) {
      std::string known;
      for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
      return Status::invalid("unknown strategy '" + c.strategy + "'; expected one of " + known);
    }
    const int64_t seed = doc.value("seed", int64_t{1});
    c.seed = uint64_t(seed);
    if (doc.contains("strategy_options")) {
      const json& so = doc["strategy_options"];
      if (Status s = check_keys(so, {"startup_trials", "population_size", "tournament_size", "gamma", "tpe_candidates"},
                                "'strategy_options'");
          !s.ok())
        return s;
      c.options.startup_trials = so.value("startup_trials", c.options.startup_trials);
      c.options.population_size = so.value("population_size", c.options.population_size);
      c.options.tournament_size = so.value("tournament_size", c.options.tournament_size);
      c.options.gamma = so.value("gamma", c.options.gamma);
      c.options.tpe_candidates = so.value("tpe_candidates", c.options.tpe_candidates);
    }
    if (doc.contains("budget")) {
      const json& b = doc["budget"];
      if (Status s = check_keys(b, {"trials", "wall_time_s"}, "'budget'"); !s.ok()) return s;
      const int64_t trials = b.value("trials", int64_t(c.budget_trials));
      if (trials < 1 || trials > 1'000'000) return Status::invalid("'budget.trials' must be within 1..1000000");
      c.budget_trials = size_t(trials);
      const double wall = b.value("wall_time_s", 0.0);
      if (wall < 0 || !std::isfinite(wall)) return Status::invalid("'budget.wall_time_s' must be >= 0 (0: none)");
      c.rule.wall_budget_ms = int64_t(wall * 1000);
    }
    if (doc.contains("plateau")) {
      const json& p = doc["plateau"];
      if (Status s = check_keys(p, {"window", "min_improvement"}, "'plateau'"); !s.ok()) return s;
      const int64_t w = p.value("window", int64_t(c.rule.plateau_window));
      if (w < 0) return Status::invalid("'plateau.window' must be >= 0 (0: no plateau rule)");
      c.rule.plateau_window = size_t(w);
      c.min_improvement = p.value("min_improvement", c.min_improvement);
      if (!(c.min_improvement >= 0 && c.min_improvement < 1))
        return Status::invalid("'plateau.min_improvement' must be within [0, 1)");
    }
    c.rule.roofline_fraction = doc.value("roofline_fraction", c.rule.roofline_fraction);
    if (!(c.rule.roofline_fraction >= 0 && c.rule.roofline_fraction <= 1))
      return Status::invalid("'roofline_fraction' must be within [0, 1] (0: no roofline rule)");

    c.source = doc.value("source", "");
    if (doc.contains("space")) {
      if (c.source.empty()) return Status::invalid("'space' declares a custom candidate's tunables; give its 'source' too");
      for (const auto& t : doc["space"]) {
        if (Status s = check_keys(t, {"name", "values", "default"}, "a 'space' entry"); !s.ok()) return s;
        kernels::Tunable x{t.at("name").get<std::string>(), t.at("values").get<std::vector<int64_t>>(), 0};
        if (x.name.empty() || x.values.empty()) return Status::invalid("a 'space' entry needs a name and values");
        x.default_value = t.value("default", x.values.front());
        if (std::find(x.values.begin(), x.values.end(), x.default_value) == x.values.end())
          return Status::invalid("tunable " + x.name + ": default " + std::to_string(x.default_value) +
                                 " is not one of its values");
        c.space.push_back(std::move(x));
      }
    }
    // Validate the strategy options and the custom space once.
    if (auto st = search::make_strategy(c.strategy, c.space, c.seed, c.options); !st.ok()) return st.status();

    auto timeout = read_timeout_ms(doc, c.base.timeout_ms);
    if (!timeout.ok()) return timeout.status();
    c.base.timeout_ms = *timeout;
    auto measure = read_measure(doc);
    if (!measure.ok()) return measure.status();
    c.base.measure = *measure;
    c.base.tag = doc.value("tag", "");
    c.base.description = doc.value("description", c.source.empty() ? "starter source" : "custom source");

    const std::string default_backend = doc.value("backend", "cpu");
    std::vector<std::string> models;
    if (doc.contains("gpu_models")) models = doc["gpu_models"].get<std::vector<std::string>>();
    if (!doc.contains("targets") || !doc["targets"].is_array() || doc["targets"].empty())
      return Status::invalid("a study campaign needs 'targets': a list of {kernel_type, shape(s), dtype(s), share}");

    struct Expanded {
      StudyDef def;
      std::optional<double> share;
      size_t target = 0;  // its index in `starts`
    };
    std::vector<std::vector<search::Config>> starts;  // each target's, before defaults fill them
    std::vector<Expanded> targets;
    size_t with_share = 0;
    for (const auto& t : doc["targets"]) {
      if (Status s = check_keys(t, kTargetKeys, "a target"); !s.ok()) return s;
      if (!t.contains("kernel_type")) return Status::invalid("a target lacks 'kernel_type'");
      const std::string type = t["kernel_type"].get<std::string>();
      const kernels::KernelSpec* spec = kernels::find(type);
      if (!spec)
        return Status::invalid("unknown kernel_type '" + type + "'; the kernel types are " + kernels::type_names());
      const std::string bs = t.value("backend", default_backend);
      auto backend = parse_backend(bs);
      if (!backend) return Status::invalid("unknown backend '" + bs + "'; expected cpu, cuda or triton");
      auto bit = spec->backends.find(*backend);
      if (bit == spec->backends.end()) return Status::invalid("kernel " + type + " has no " + bs + " source");
      std::vector<std::vector<int64_t>> shapes;
      std::vector<json> shape_docs;
      if (t.contains("shape")) shape_docs.push_back(t["shape"]);
      if (t.contains("shapes")) {
        if (!t["shapes"].is_array()) return Status::invalid("target " + type + ": 'shapes' must be a list of shapes");
        for (const auto& s : t["shapes"]) shape_docs.push_back(s);
      }
      for (const auto& d : shape_docs) {
        auto shape = read_shape(d);
        if (!shape.ok()) return Status::invalid("target " + type + ": " + shape.status().message());
        shapes.push_back(std::move(*shape));
      }
      if (shapes.empty()) shapes = bit->second.default_shapes;
      for (const auto& s : shapes) {
        if (std::string why = spec->check_shape(s); !why.empty())
          return Status::invalid("target " + type + ": bad shape " + shape_string(s) + ": " + why);
        for (DType dt : spec->dtypes)
          if (Status st = check_shape_size(*spec, s, dt, *backend, PlanLimits{}); !st.ok()) return st;
      }
      std::vector<DType> dtypes;
      std::vector<std::string> dnames;
      if (t.contains("dtype")) dnames.push_back(t["dtype"].get<std::string>());
      if (t.contains("dtypes"))
        for (const auto& d : t["dtypes"]) dnames.push_back(d.get<std::string>());
      for (const auto& d : dnames) {
        auto dt = parse_dtype(d);
        if (!dt) return Status::invalid("unknown dtype '" + d + "'; expected fp32, fp16 or bf16");
        if (std::find(spec->dtypes.begin(), spec->dtypes.end(), *dt) == spec->dtypes.end())
          return Status::invalid("kernel " + type + " has no " + d + " dtype");
        dtypes.push_back(*dt);
      }
      if (dtypes.empty()) dtypes = spec->dtypes;
      const std::vector<kernels::Tunable>& space = !c.space.empty() || !c.source.empty() ? c.space : bit->second.space;
      auto start = read_start(t, type, space);
      if (!start.ok()) return start.status();
      starts.push_back(std::move(*start));
      std::optional<double> share;
      if (t.contains("share")) {
        share = t["share"].get<double>();
        if (!(*share >= 0 && *share <= 1)) return Status::invalid("target " + type + ": 'share' must be within [0, 1]");
        ++with_share;
      }
      const double n = double(shapes.size() * dtypes.size());
      for (const auto& s : shapes)
        for (DType d : dtypes) {
          Expanded e;
          e.def.kernel_type = type;
          e.def.backend = *backend;
          e.def.shape = s;
          e.def.dtype = d;
          if (share) e.share = *share / n;  // a target's share is split over what it expands to
          e.target = starts.size() - 1;
          targets.push_back(std::move(e));
        }
    }
    if (with_share != 0 && with_share != doc["targets"].size())
      return Status::invalid("give 'share' for every target or for none (equal shares)");
    double sum = 0;
    for (const auto& e : targets) sum += e.share.value_or(0);
    if (sum > 1 + 1e-9) return Status::invalid("the targets' shares sum to " + std::to_string(sum) + ", above 1");

    // A start configuration that some dtype of its target cannot build is left out of that dtype's
    // studies; one that none can build is refused. Per target and start configuration: "" once some
    // dtype built it, else the first dtype's refusal.
    std::vector<std::vector<std::optional<std::string>>> refusals;
    for (const auto& list : starts) refusals.emplace_back(list.size());
    for (const auto& e : targets) {
      std::vector<std::string> ms;
      if (e.def.backend == Backend::kCpu) {
        ms = {"cpu"};
      } else {
        if (models.empty())
          return Status::invalid("target " + e.def.kernel_type + " runs on " + backend_name(e.def.backend) +
                                 ": name the GPU models to tune for, e.g. \"gpu_models\": [\"NVIDIA H200\"]");
        ms = models;
      }
      StudyDef with_start = e.def;
      const kernels::KernelSpec* spec = kernels::find(e.def.kernel_type);
      const bool starter = c.source.empty() && e.def.backend == Backend::kCuda && spec->cuda_config_error;
      for (size_t i = 0; i < starts[e.target].size(); ++i) {
        const search::Config& given = starts[e.target][i];
        std::optional<std::string>& refusal = refusals[e.target][i];
        search::Config full;
        if (const kernels::BackendSource* src = backend_source(e.def); src && c.space.empty() && c.source.empty()) {
          full = kernels::complete_config(*src, e.def.dtype, given, starter ? spec->cuda_config_error : nullptr);
        } else {
          full = default_of(c, e.def);
          for (const auto& [name, value] : given) full[name] = value;
        }
        if (starter)
          if (std::string why = spec->cuda_config_error(full, e.def.dtype); !why.empty()) {
            if (!refusal)
              refusal = "target " + e.def.kernel_type + ": 'start' configuration " + config_string(full) +
                        " cannot be built in " + dtype_name(e.def.dtype) + ": " + why;
            continue;
          }
        refusal = "";
        if (std::find(with_start.start.begin(), with_start.start.end(), full) == with_start.start.end())
          with_start.start.push_back(std::move(full));
      }
      for (const auto& m : ms) {
        StudyDef d = with_start;
        d.index = int(c.studies.size());
        d.gpu_model = m;
        d.share = e.share.value_or(1.0 / double(targets.size()));
        d.label = d.kernel_type + " " + shape_string(d.shape) + " " + dtype_name(d.dtype) + " " +
                  backend_name(d.backend) + " on " + m;
        c.studies.push_back(std::move(d));
      }
    }
    for (const auto& target : refusals)
      for (const auto& refusal : target)
        if (refusal && !refusal->empty()) return Status::invalid(*refusal + " (nor in the target's other dtypes)");
    if (c.studies.size() > 999) return Status::invalid("a study campaign may hold at most 999 studies");
    return c;
  } catch (const std::exception& e) {
    return Status::invalid(std::string("study campaign does not match its schema: ") + e.what());
  }
}

CampaignRecord study_record(const StudyCampaign& c, const json& doc, const std::string& campaign_id, int64_t wall_ms) {
  CampaignRecord r;
  r.campaign_id = campaign_id;
  r.name = c.name;
  r.definition = doc;
  r.job_count = 0;
  r.submitted_wall_ms = wall_ms;
  return r;
}

StudyProgress study_progress(const StudyCampaign& c, const std::string& campaign_id, int64_t submitted_wall_ms,
                             const std::vector<const JobRecord*>& jobs,
                             const std::map<std::string, ResultRecord>& results, int64_t now_wall_ms,
                             const SharedMemoryLimits& shared_memory) {
  StudyProgress p;
  std::vector<std::vector<const JobRecord*>> by_study(c.studies.size());
  for (const JobRecord* j : jobs)
    if (j->spec.campaign_id == campaign_id && j->spec.study >= 0 && size_t(j->spec.study) < c.studies.size())
      by_study[size_t(j->spec.study)].push_back(j);
  bool all_done = true;
  size_t in_flight_total = 0;
  std::map<std::string, std::vector<search::Target>> per_model;
  for (const StudyDef& d : c.studies) {
    StudyStatus s;
    s.index = d.index;
    s.label = d.label;
    s.gpu_model = d.gpu_model;
    auto& list = by_study[size_t(d.index)];
    std::sort(list.begin(), list.end(), [](const JobRecord* a, const JobRecord* b) { return a->spec.job_id < b->spec.job_id; });
    std::vector<search::Trial> finished;
    std::vector<double> baselines;
    const ResultRecord* best = nullptr;
    const JobRecord* best_job = nullptr;
    for (const JobRecord* j : list) {
      search::Trial t{j->spec.config, std::nullopt};
      const bool over = j->state == JobState::kDone || j->state == JobState::kLost;
      auto it = results.find(j->spec.job_id);
      if (!over) {
        ++s.in_flight;
      } else {
        ++s.trials;
        if (it != results.end() && it->second.status == ResultStatus::kPass && it->second.m.latency_us > 0) {
          const ResultRecord& r = it->second;
          t.value = r.m.latency_us;
          ++s.passed;
          if (r.m.baseline_us > 0) baselines.push_back(r.m.baseline_us);
          if (!best || r.m.latency_us < best->m.latency_us) {
            best = &r;
            best_job = j;
          }
        }
        finished.push_back(t);
      }
      s.history.push_back(std::move(t));
    }
    if (best) {
      s.best_us = best->m.latency_us;
      s.best_job_id = best->job_id;
      s.best_speedup = best->m.speedup > 0       ? best->m.speedup
                       : best->m.baseline_us > 0 ? best->m.baseline_us / best->m.latency_us
                                                 : 0.0;
      s.best_config = best_job->spec.config;
      if (best->m.pct_peak > 0) s.roofline_us = best->m.latency_us * best->m.pct_peak / 100.0;
    }
    s.baseline_us = median(baselines);
    s.since_improvement = search::trials_since_improvement(finished, c.min_improvement);

    search::Target& t = s.target;
    t.name = d.label;
    t.share = d.share;
    t.baseline_us = s.baseline_us > 0 ? s.baseline_us : (s.best_us ? *s.best_us : 1.0);
    t.best_us = s.best_us;
    t.roofline_us = std::min(s.roofline_us, t.baseline_us);
    t.trials = s.trials;
    t.in_flight = s.in_flight;
    t.budget_trials = c.budget_trials;
    t.trials_since_improvement = s.since_improvement;
    t.started_ms = submitted_wall_ms;
    s.stop = search::stop_reason(t, c.rule, now_wall_ms);
    s.done = s.stop != search::StopReason::kNone;
    if (!s.done && s.in_flight == 0 && s.trials > 0) {
      // The feasible space may be used up before the budget.
      auto strategy = strategy_for(c, d, shared_memory);
      if (strategy.ok() && (*strategy)->propose(1, s.history).empty()) s.done = true;
    }
    t.done = s.done;
    if (!s.done && s.trials > 0) {
      const double elapsed_s = std::max<double>(1e-3, (now_wall_ms - submitted_wall_ms) / 1000.0);
      s.eta_s = double(c.budget_trials - std::min(c.budget_trials, s.trials)) * elapsed_s / double(s.trials);
    }
    all_done = all_done && s.done;
    in_flight_total += s.in_flight;
    per_model[gpu_model_key(d.gpu_model)].push_back(t);
    p.studies.push_back(std::move(s));
  }
  for (const auto& [model, targets] : per_model) p.amdahl[model] = search::amdahl_estimate(targets);
  p.complete = all_done && in_flight_total == 0;
  return p;
}

std::vector<JobSpec> propose_study_jobs(const StudyCampaign& c, const std::string& campaign_id,
                                        const StudyProgress& progress, std::map<std::string, int64_t>* free_slots,
                                        const SharedMemoryLimits& shared_memory) {
  std::vector<JobSpec> out;
  std::map<std::string, std::vector<size_t>> per_model;  // study indices by model
  for (const StudyStatus& s : progress.studies) per_model[gpu_model_key(s.gpu_model)].push_back(size_t(s.index));
  for (const auto& [model, idx] : per_model) {
    auto fit = free_slots->find(model);
    if (fit == free_slots->end() || fit->second <= 0) continue;
    std::vector<search::Target> targets;
    for (size_t i : idx) targets.push_back(progress.studies[i].target);
    auto alloc = search::allocate(targets, size_t(fit->second));
    if (!alloc.ok()) continue;
    for (size_t k = 0; k < idx.size(); ++k) {
      const size_t n = alloc->slots[k];
      if (n == 0) continue;
      const StudyDef& d = c.studies[idx[k]];
      const StudyStatus& s = progress.studies[idx[k]];
      std::vector<search::Trial> history = s.history;
      std::vector<search::Config> configs;
      if (history.empty()) {
        configs.push_back(default_of(c, d));
        history.push_back({configs.back(), std::nullopt});
      }
      if (!d.start.empty() && configs.size() < n) {
        // The target's start configurations not yet tried, in order; ones this GPU model cannot
        // launch are passed over.
        const auto launchable = feasibility(c, d, shared_memory);
        for (const search::Config& cfg : d.start) {
          if (configs.size() >= n) break;
          const bool tried =
              std::any_of(history.begin(), history.end(), [&](const search::Trial& t) { return t.config == cfg; });
          if (tried || (launchable && !launchable(cfg))) continue;
          configs.push_back(cfg);
          history.push_back({cfg, std::nullopt});
        }
      }
      if (configs.size() < n) {
        auto strategy = strategy_for(c, d, shared_memory);
        if (!strategy.ok()) continue;
        for (auto& cfg : (*strategy)->propose(n - configs.size(), history)) configs.push_back(std::move(cfg));
      }
      const kernels::BackendSource* src = backend_source(d);
      size_t trial = s.history.size();
      for (auto& cfg : configs) {
        JobSpec j = c.base;
        j.job_id = study_job_id(campaign_id, d.index, trial++);
        j.campaign_id = campaign_id;
        j.kernel_type = d.kernel_type;
        j.source = !c.source.empty() ? c.source : (src ? src->source : "");
        j.config = std::move(cfg);
        j.shape = d.shape;
        j.dtype = d.dtype;
        j.requires_.backend = d.backend;
        j.requires_.gpu_model = d.gpu_model;
        if (j.tag.empty()) j.tag = d.kernel_type + "/" + backend_name(d.backend) + "/study";
        j.description = c.base.description + " " + config_string(j.config);
        j.study = d.index;
        out.push_back(std::move(j));
        --fit->second;
      }
    }
  }
  return out;
}

protocol::StudyRow study_status_row(const StudyStatus& s) {
  protocol::StudyRow r;
  if (s.best_us) r.best = protocol::StudyBest{*s.best_us, s.best_job_id, config_string(s.best_config), s.best_speedup};
  r.study = s.index;
  r.target = s.label;
  r.gpu_model = s.gpu_model;
  r.share = s.target.share;
  r.trials = int64_t(s.trials);
  r.in_flight = int64_t(s.in_flight);
  r.passed = int64_t(s.passed);
  r.baseline_us = s.baseline_us;
  r.roofline_us = s.roofline_us;
  r.since_improvement = int64_t(s.since_improvement);
  r.stop = s.done ? (s.stop == search::StopReason::kNone ? "EXHAUSTED" : search::stop_reason_name(s.stop)) : "";
  r.done = s.done;
  r.eta_s = s.eta_s;
  return r;
}

}  // namespace ak
