#include "common/tuning.h"

#include <algorithm>
#include <cctype>
#include <ctime>

namespace ak {

using nlohmann::json;

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::string iso_utc(int64_t wall_ms) {
  const std::time_t t = static_cast<std::time_t>(wall_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void to_json(json& j, const TunedEntry& v) {
  j = {{"kernel_type", v.kernel_type},
       {"backend", backend_name(v.backend)},
       {"gpu_model", v.gpu_model},
       {"dtype", dtype_name(v.dtype)},
       {"shape", v.shape},
       {"config", v.config},
       {"latency_us", v.m.latency_us},
       {"baseline_us", v.m.baseline_us},
       {"speedup", v.m.speedup},
       {"measurement", v.m},
       {"source", v.source},
       {"source_hash", v.source_hash},
       {"options_hash", v.options_hash},
       {"provenance",
        {{"job_id", v.job_id},
         {"campaign_id", v.campaign_id},
         {"worker_id", v.worker_id},
         {"arch", v.arch},
         {"versions", v.versions},
         {"completed_wall_ms", v.completed_wall_ms},
         {"date", v.date}}}};
}

void from_json(const json& j, TunedEntry& v) {
  v.kernel_type = j.at("kernel_type").get<std::string>();
  const std::string b = j.at("backend").get<std::string>();
  auto backend = parse_backend(b);
  if (!backend) throw json::other_error::create(501, "unknown backend '" + b + "'", &j);
  v.backend = *backend;
  v.gpu_model = j.at("gpu_model").get<std::string>();
  const std::string d = j.at("dtype").get<std::string>();
  auto dtype = parse_dtype(d);
  if (!dtype) throw json::other_error::create(501, "unknown dtype '" + d + "'", &j);
  v.dtype = *dtype;
  v.shape = j.at("shape").get<std::vector<int64_t>>();
  v.config = j.at("config").get<std::map<std::string, int64_t>>();
  v.m = j.contains("measurement") ? j.at("measurement").get<Measurement>() : Measurement{};
  v.m.latency_us = j.at("latency_us").get<double>();
  v.m.baseline_us = j.value("baseline_us", v.m.baseline_us);
  v.m.speedup = j.value("speedup", v.m.speedup);
  v.source = j.value("source", "");
  v.source_hash = j.value("source_hash", "");
  v.options_hash = j.value("options_hash", "");
  const json p = j.value("provenance", json::object());
  v.job_id = p.value("job_id", "");
  v.campaign_id = p.value("campaign_id", "");
  v.worker_id = p.value("worker_id", "");
  v.arch = p.value("arch", "");
  v.versions = p.value("versions", std::map<std::string, std::string>{});
  v.completed_wall_ms = p.value("completed_wall_ms", int64_t{0});
  v.date = p.value("date", "");
}

namespace {

std::string key_of(const std::string& kernel_type, Backend backend, const std::string& gpu_model, DType dtype,
                   const std::vector<int64_t>& shape) {
  return kernel_type + "|" + backend_name(backend) + "|" + lower(gpu_model) + "|" + dtype_name(dtype) + "|" +
         shape_string(shape);
}

}  // namespace

std::string tuning_key(const TunedEntry& e) { return key_of(e.kernel_type, e.backend, e.gpu_model, e.dtype, e.shape); }

std::string tuning_key(const JobSpec& job, const std::string& gpu_model) {
  return key_of(job.kernel_type, job.requires_.backend, gpu_model, job.dtype, job.shape);
}

bool replaces(const TunedEntry& candidate, const TunedEntry& incumbent) {
  return candidate.m.latency_us > 0 && candidate.m.latency_us < incumbent.m.latency_us;
}

std::optional<TunedEntry> tuned_entry_from(const JobRecord& job, const ResultRecord& result, const Capabilities* caps) {
  if (result.status != ResultStatus::kPass || !(result.m.latency_us > 0) || job.spec.kernel_type.empty() ||
      result.gpu.empty() || job.spec.kernelbench)
    return std::nullopt;
  TunedEntry e;
  e.kernel_type = job.spec.kernel_type;
  e.backend = job.spec.requires_.backend;
  e.gpu_model = result.gpu;
  e.dtype = job.spec.dtype;
  e.shape = job.spec.shape;
  e.config = job.spec.config;
  e.source = job.spec.source;
  e.source_hash = result.source_hash;
  e.options_hash = result.options_hash;
  e.m = result.m;
  e.job_id = result.job_id;
  e.campaign_id = job.spec.campaign_id;
  e.worker_id = result.worker_id;
  if (caps) {
    e.arch = caps->arch;
    e.versions = caps->versions;
  }
  e.completed_wall_ms = result.completed_wall_ms;
  e.date = iso_utc(result.completed_wall_ms);
  return e;
}

bool TuningQuery::matches(const TunedEntry& e) const {
  if (!kernel_type.empty() && e.kernel_type != kernel_type) return false;
  if (!backend.empty() && backend_name(e.backend) != backend) return false;
  if (!gpu_model.empty() && lower(e.gpu_model) != lower(gpu_model)) return false;
  if (!dtype.empty() && dtype_name(e.dtype) != dtype) return false;
  if (!shape.empty() && shape_string(e.shape) != shape) return false;
  return true;
}

json tuning_export(std::vector<TunedEntry> entries, int64_t exported_wall_ms) {
  std::sort(entries.begin(), entries.end(),
            [](const TunedEntry& a, const TunedEntry& b) { return tuning_key(a) < tuning_key(b); });
  json list = json::array();
  for (const auto& e : entries) list.push_back(e);
  return {{"format", 1}, {"exported_wall_ms", exported_wall_ms}, {"exported", iso_utc(exported_wall_ms)},
          {"entries", std::move(list)}};
}

Result<std::vector<TunedEntry>> parse_tuning_export(const json& doc) {
  if (!doc.is_object() || !doc.contains("format") || doc["format"] != 1)
    return Status::invalid("tuning database: expected an object with \"format\": 1 (autokernel best --export writes one)");
  if (!doc.contains("entries") || !doc["entries"].is_array())
    return Status::invalid("tuning database: \"entries\" must be a list");
  std::vector<TunedEntry> out;
  size_t i = 0;
  for (const auto& e : doc["entries"]) {
    try {
      TunedEntry t = e.get<TunedEntry>();
      if (t.shape.empty()) return Status::invalid("tuning database: entry " + std::to_string(i) + " has no shape");
      for (int64_t d : t.shape)
        if (d < 1) return Status::invalid("tuning database: entry " + std::to_string(i) + " has a dimension < 1");
      if (!(t.m.latency_us > 0))
        return Status::invalid("tuning database: entry " + std::to_string(i) + " has no positive latency_us");
      out.push_back(std::move(t));
    } catch (const json::exception& ex) {
      return Status::invalid("tuning database: entry " + std::to_string(i) + ": " + ex.what());
    }
    ++i;
  }
  return out;
}

}  // namespace ak
