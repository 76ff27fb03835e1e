#include "coordinator/campaign.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>
#include <type_traits>

#include "common/hash.h"
#include "common/ids.h"
#include "kernels/registry.h"

namespace ak {

using nlohmann::json;

namespace {
const std::set<std::string> kKeys = {"name",   "kernel_type", "backend", "shapes",     "dtypes",
                                     "configs", "repeat",     "source",  "description", "requires",
                                     "timeout_ms", "measure", "tag"};
}

nlohmann::json default_campaign(Backend backend) {
  json configs = "all";
  if (backend == Backend::kCuda) {
    // The two-pass path's 24 points: the workload of the throughput figures since 2026-12-03
    // (bench/throughput.sh), kept as the search space grows (AK_CACHE, AK_VEC=8).
    configs = json::array();
    if (const kernels::KernelSpec* k = kernels::find("softmax"))
      for (const auto& point : kernels::enumerate_space(k->backends.at(Backend::kCuda).space)) {
        const auto cache = point.find("AK_CACHE");
        const auto vec = point.find("AK_VEC");
        if ((cache == point.end() || cache->second == 0) && (vec == point.end() || vec->second <= 4))
          configs.push_back(point);
      }
  }
  return {{"name", std::string("softmax-default-") + backend_name(backend)},
          {"kernel_type", "softmax"},
          {"backend", backend_name(backend)},
          {"configs", configs}};
}

CampaignRecord campaign_record(const json& doc, const std::string& campaign_id, const std::string& name, size_t jobs,
                               int64_t wall_ms) {
  CampaignRecord r;
  r.campaign_id = campaign_id;
  r.name = name;
  r.definition = doc;
  r.job_count = static_cast<int64_t>(jobs);
  r.submitted_wall_ms = wall_ms;
  return r;
}

Status check_keys(const json& obj, const std::set<std::string>& keys, const std::string& where,
                  const std::string& doc) {
  if (!obj.is_object()) return Status::invalid(where + " must be an object");
  for (const auto& [k, v] : obj.items())
    if (!keys.count(k)) {
      std::string known;
      for (const std::string& x : keys) known += (known.empty() ? "" : ", ") + x;
      return Status::invalid("unknown key '" + k.substr(0, 64) + "' in " + where + "; the keys are " + known + " (" +
                             doc + ")");
    }
  return {};
}

namespace {
std::string what_arrived(const json& v) {
  std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 40) + "...";
  return std::string(v.type_name()) + " " + text;
}
}  // namespace

Result<int64_t> integer_in(const json& v, const std::string& field, int64_t lo, int64_t hi) {
  const auto bad = [&]() {
    return Status::invalid("'" + field + "' must be an integer within " + std::to_string(lo) + ".." +
                           std::to_string(hi) + ", got " + what_arrived(v));
  };
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (hi < 0 || u > uint64_t(hi)) return bad();
    const int64_t x = int64_t(u);
    if (x < lo) return bad();
    return x;
  }
  if (v.is_number_integer()) {
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) return bad();
    return x;
  }
  if (v.is_number_float()) {
    // An integral float within range (TOML's 1024.0) is the integer; anything else is refused,
    // never converted (1e30 must not become INT64_MIN).
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || d < double(lo) || d > double(hi)) return bad();
    return int64_t(d);
  }
  return bad();
}

Result<double> number_in(const json& v, const std::string& field, double lo, double hi) {
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < lo || v.get<double>() > hi) {
    std::ostringstream range;
    range << lo << ".." << hi;
    return Status::invalid("'" + field + "' must be a number within " + range.str() + ", got " + what_arrived(v));
  }
  return v.get<double>();
}

Result<int64_t> read_timeout_ms(const json& doc, int64_t fallback) {
  if (!doc.contains("timeout_ms")) return fallback;
  return integer_in(doc.at("timeout_ms"), "timeout_ms", kMinTimeoutMs, kMaxTimeoutMs);
}

Result<MeasureOptions> read_measure(const json& doc) {
  MeasureOptions m;
  if (!doc.contains("measure")) return m;
  const json& j = doc.at("measure");
  if (Status s = check_keys(j, {"warmup", "min_samples", "max_samples", "max_time_ms", "noise_target", "cold"},
                            "'measure'", "coordinator/CAMPAIGNS.md");
      !s.ok())
    return s;
  const auto integer = [&](const char* key, int64_t lo, int64_t hi, auto* out) -> Status {
    if (!j.contains(key)) return {};
    auto x = integer_in(j.at(key), std::string("measure.") + key, lo, hi);
    if (!x.ok()) return x.status();
    *out = static_cast<std::remove_pointer_t<decltype(out)>>(*x);
    return {};
  };
  if (Status s = integer("warmup", 0, 10'000, &m.warmup); !s.ok()) return s;
  if (Status s = integer("min_samples", 1, 100'000, &m.min_samples); !s.ok()) return s;
  if (Status s = integer("max_samples", m.min_samples, 100'000, &m.max_samples); !s.ok()) return s;
  if (m.max_samples < m.min_samples)
    return Status::invalid("'measure.max_samples' (default " + std::to_string(m.max_samples) +
                           ") must be at least 'measure.min_samples' (" + std::to_string(m.min_samples) + ")");
  if (Status s = integer("max_time_ms", 1, kMaxTimeoutMs, &m.max_time_ms); !s.ok()) return s;
  if (j.contains("noise_target")) {
    auto x = number_in(j.at("noise_target"), "measure.noise_target", 0, 1);
    if (!x.ok()) return x.status();
    m.noise_target = *x;
  }
  if (j.contains("cold")) {
    if (!j.at("cold").is_boolean())
      return Status::invalid("'measure.cold' must be true or false, got " + what_arrived(j.at("cold")));
    m.cold = j.at("cold").get<bool>();
  }
  return m;
}

Result<std::vector<int64_t>> read_shape(const json& v) {
  if (!v.is_array() || v.empty() || v.size() > 8)
    return Status::invalid("each shape must be a list of 1 to 8 integers, got " + what_arrived(v));
  std::vector<int64_t> shape;
  for (const auto& d : v) {
    auto x = integer_in(d, "shapes", 0, int64_t{1} << 40);  // 0: the kernel says why not
    if (!x.ok()) return x.status();
    shape.push_back(*x);
  }
  return shape;
}

namespace {
std::string bytes_text(double b) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3g GB", b / 1e9);
  return buf;
}
}  // namespace

Status check_shape_size(const kernels::KernelSpec& spec, const std::vector<int64_t>& shape, DType dtype,
                        Backend backend, const PlanLimits& limits) {
  const double bytes = spec.bytes ? spec.bytes(shape, dtype) : 0;
  if (!(bytes <= limits.max_shape_bytes))
    return Status::invalid("shape " + shape_string(shape) + " of " + spec.name + " " + dtype_name(dtype) + " moves " +
                           bytes_text(bytes) + " per call; this coordinator plans at most " +
                           bytes_text(limits.max_shape_bytes) + " per job");
  if (auto it = limits.device_memory_bytes.find(backend);
      it != limits.device_memory_bytes.end() && it->second > 0 && bytes > double(it->second))
    return Status::invalid("shape " + shape_string(shape) + " of " + spec.name + " " + dtype_name(dtype) + " needs " +
                           bytes_text(bytes) + " of device memory; the largest connected " + backend_name(backend) +
                           " worker has " + bytes_text(double(it->second)));
  return {};
}

Result<PlannedCampaign> plan_campaign(const json& doc, const std::string& campaign_id, int64_t wall_ms,
                                      const PlanLimits& limits) {
  if (!doc.is_object()) return Status::invalid("a campaign must be a JSON/TOML object with at least kernel_type and backend");
  for (const auto& [k, v] : doc.items())
    if (!kKeys.count(k)) {
      std::string known;
      for (const std::string& x : kKeys) known += (known.empty() ? "" : ", ") + x;
      return Status::invalid("unknown campaign key '" + k.substr(0, 64) + "'; the keys are " + known +
                             " (coordinator/CAMPAIGNS.md)");
    }
  try {
    if (!doc.contains("kernel_type")) return Status::invalid("campaign lacks 'kernel_type' (e.g. \"softmax\")");
    const std::string type = doc.at("kernel_type").get<std::string>();
    const kernels::KernelSpec* spec = kernels::find(type);
    if (!spec)
      return Status::invalid("unknown kernel_type '" + type + "'; the kernel types are " + kernels::type_names());
    const std::string backend_s = doc.value("backend", "cpu");
    auto backend = parse_backend(backend_s);
    if (!backend) return Status::invalid("unknown backend '" + backend_s + "'; expected cpu, cuda or triton");
    auto bit = spec->backends.find(*backend);
    if (bit == spec->backends.end())
      return Status::invalid("kernel " + type + " has no " + backend_s + " source");
    const kernels::BackendSource& src = bit->second;

    std::vector<std::vector<int64_t>> shapes = src.default_shapes;
    if (doc.contains("shapes")) {
      if (!doc.at("shapes").is_array())
        return Status::invalid("'shapes' must be a list of shapes ([[rows, cols], ...])");
      shapes.clear();
      for (const auto& v : doc.at("shapes")) {
        auto shape = read_shape(v);
        if (!shape.ok()) return shape.status();
        shapes.push_back(std::move(*shape));
      }
    }
    if (shapes.empty()) return Status::invalid("campaign has no shapes");
    for (const auto& s : shapes) {
      std::string why = spec->check_shape(s);
      if (!why.empty()) return Status::invalid("bad shape " + shape_string(s) + ": " + why);
    }
    std::vector<DType> dtypes = spec->dtypes;
    if (doc.contains("dtypes")) {
      dtypes.clear();
      for (const auto& d : doc.at("dtypes")) {
        auto dt = parse_dtype(d.get<std::string>());
        if (!dt) return Status::invalid("unknown dtype '" + d.get<std::string>() + "'; expected fp32, fp16 or bf16");
        dtypes.push_back(*dt);
      }
      if (dtypes.empty()) return Status::invalid("'dtypes' is empty; name at least one of fp32, fp16, bf16");
    }
    // The configurations of each dtype: "default" and the objects of a list start from the
    // dtype's defaults (kernels::default_config(source, dtype)).
    std::map<DType, std::vector<std::map<std::string, int64_t>>> configs;
    const json cfg = doc.value("configs", json("all"));
    for (DType dt : dtypes) {
      std::vector<std::map<std::string, int64_t>>& list = configs[dt];
      if (cfg.is_string() && cfg.get<std::string>() == "all") {
        list = kernels::enumerate_space(src.space);
      } else if (cfg.is_string() && cfg.get<std::string>() == "default") {
        list = {kernels::default_config(src, dt)};
      } else if (cfg.is_array()) {
        if (cfg.empty())
          return Status::invalid(
              "'configs' is an empty list, which plans no job; give at least one object, \"default\" or \"all\"");
        for (const auto& c : cfg) {
          if (!c.is_object())
            return Status::invalid("each entry of 'configs' must be an object, got " + what_arrived(c));
          std::map<std::string, int64_t> m;
          for (const auto& [k, v] : c.items()) {
            const kernels::Tunable* tunable = nullptr;
            for (const auto& t : src.space)
              if (t.name == k) tunable = &t;
            if (!tunable) return Status::invalid("config names unknown tunable '" + k + "' of " + type + "/" + backend_s);
            auto checked = integer_in(v, "configs: " + k, INT64_MIN, INT64_MAX);
            if (!checked.ok()) return checked.status();
            const int64_t value = *checked;
            if (std::find(tunable->values.begin(), tunable->values.end(), value) == tunable->values.end())
              return Status::invalid("config sets " + k + "=" + std::to_string(value) + ", which is not in its search space");
            m[k] = value;
          }
          // The starter's own build check decides whether the dtype's defaults suit what was given.
          const bool starter = !doc.contains("source") && *backend == Backend::kCuda;
          list.push_back(kernels::complete_config(src, dt, m, starter ? spec->cuda_config_error : nullptr));
        }
      } else {
        return Status::invalid("'configs' must be \"all\", \"default\" or a list of objects");
      }
    }
    int64_t repeat = 1;
    if (doc.contains("repeat")) {
      auto r = integer_in(doc.at("repeat"), "repeat", 1, 100'000);
      if (!r.ok()) return r.status();
      repeat = *r;
    }
    for (const auto& shape : shapes)
      for (DType dt : dtypes)
        if (Status s = check_shape_size(*spec, shape, dt, *backend, limits); !s.ok()) return s;
    // Counted before anything is built: a refused campaign costs no memory.
    int64_t per_repeat = 0;
    for (DType dt : dtypes) per_repeat += int64_t(shapes.size()) * int64_t(configs.at(dt).size());
    if (per_repeat == 0) return Status::invalid("campaign plans no job");
    if (per_repeat > limits.max_jobs || repeat > limits.max_jobs / per_repeat)
      return Status::invalid("campaign plans " + std::to_string(repeat) + " x " + std::to_string(per_repeat) + " = " +
                             std::to_string(repeat * per_repeat) + " jobs (repeat x shapes x dtypes x configs); " +
                             "this coordinator accepts at most " + std::to_string(limits.max_jobs) +
                             " per campaign (--max-jobs-per-submit); split it or narrow it");

    PlannedCampaign p;
    JobSpec base;
    base.campaign_id = campaign_id;
    base.kernel_type = type;
    {
      std::string text = doc.value("source", src.source);
      base.source_hash = xxh64_hex(text);
      p.sources.emplace(base.source_hash, std::move(text));
    }
    base.requires_.backend = *backend;
    if (doc.contains("requires")) {
      if (Status s = check_keys(doc.at("requires"), {"gpu_model", "arch"}, "'requires'", "coordinator/CAMPAIGNS.md");
          !s.ok())
        return s;
      base.requires_.gpu_model = doc["requires"].value("gpu_model", "");
      base.requires_.arch = doc["requires"].value("arch", "");
    }
    auto timeout = read_timeout_ms(doc, base.timeout_ms);
    if (!timeout.ok()) return timeout.status();
    base.timeout_ms = *timeout;
    auto measure = read_measure(doc);
    if (!measure.ok()) return measure.status();
    base.measure = *measure;
    const std::string description = doc.value("description", doc.contains("source") ? "custom source" : "starter source");

    int64_t index = 0;
    for (int64_t r = 0; r < repeat; ++r)
      for (const auto& shape : shapes)
        for (DType dt : dtypes)
          for (const auto& c : configs.at(dt)) {
            JobSpec j = base;
            j.job_id = job_id_for(campaign_id, index++);
            j.shape = shape;
            j.dtype = dt;
            j.config = c;
            j.tag = doc.value("tag", type + "/" + backend_s);
            j.description = description + " " + config_string(c);
            p.jobs.push_back(std::move(j));
          }
    p.record = campaign_record(doc, campaign_id, doc.value("name", type + "-" + backend_s), p.jobs.size(), wall_ms);
    p.record.definition.erase("source");  // kept once per job; the campaign record stays small
    return p;
  } catch (const std::exception& e) {
    return Status::invalid(std::string("campaign does not match its schema: ") + e.what());
  }
}

}  // namespace ak
