#include "coordinator/campaign.h"

#include <algorithm>
#include <set>

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
  return {{"name", std::string("softmax-default-") + backend_name(backend)},
          {"kernel_type", "softmax"},
          {"backend", backend_name(backend)},
          {"configs", "all"}};
}

Status check_keys(const json& obj, const std::set<std::string>& keys, const std::string& where,
                  const std::string& doc) {
  if (!obj.is_object()) return Status::invalid(where + " must be an object");
  for (const auto& [k, v] : obj.items())
    if (!keys.count(k)) return Status::invalid("unknown key '" + k + "' in " + where + "; see " + doc);
  return {};
}

Result<PlannedCampaign> plan_campaign(const json& doc, const std::string& campaign_id, int64_t wall_ms) {
  if (!doc.is_object()) return Status::invalid("a campaign must be a JSON/TOML object with at least kernel_type and backend");
  for (const auto& [k, v] : doc.items())
    if (!kKeys.count(k)) return Status::invalid("unknown campaign key '" + k + "'; see coordinator/CAMPAIGNS.md for the keys");
  try {
    if (!doc.contains("kernel_type")) return Status::invalid("campaign lacks 'kernel_type' (e.g. \"softmax\")");
    const std::string type = doc.at("kernel_type").get<std::string>();
    const kernels::KernelSpec* spec = kernels::find(type);
    if (!spec) return Status::invalid("unknown kernel_type '" + type + "'");
    const std::string backend_s = doc.value("backend", "cpu");
    auto backend = parse_backend(backend_s);
    if (!backend) return Status::invalid("unknown backend '" + backend_s + "'; expected cpu, cuda or triton");
    auto bit = spec->backends.find(*backend);
    if (bit == spec->backends.end())
      return Status::invalid("kernel " + type + " has no " + backend_s + " source");
    const kernels::BackendSource& src = bit->second;

    std::vector<std::vector<int64_t>> shapes =
        doc.contains("shapes") ? doc.at("shapes").get<std::vector<std::vector<int64_t>>>() : src.default_shapes;
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
        for (const auto& c : cfg) {
          auto m = kernels::default_config(src, dt);
          for (const auto& [k, v] : c.items()) {
            const kernels::Tunable* tunable = nullptr;
            for (const auto& t : src.space)
              if (t.name == k) tunable = &t;
            if (!tunable) return Status::invalid("config names unknown tunable '" + k + "' of " + type + "/" + backend_s);
            const int64_t value = v.get<int64_t>();
            if (std::find(tunable->values.begin(), tunable->values.end(), value) == tunable->values.end())
              return Status::invalid("config sets " + k + "=" + std::to_string(value) + ", which is not in its search space");
            m[k] = value;
          }
          list.push_back(m);
        }
      } else {
        return Status::invalid("'configs' must be \"all\", \"default\" or a list of objects");
      }
    }
    const int64_t repeat = doc.value("repeat", int64_t{1});
    if (repeat < 1 || repeat > 100000) return Status::invalid("'repeat' must be within 1..100000");

    JobSpec base;
    base.campaign_id = campaign_id;
    base.kernel_type = type;
    base.source = doc.value("source", src.source);
    base.requires_.backend = *backend;
    for (const char* nested : {"requires", "measure"})
      if (doc.contains(nested))
        for (const auto& [k, v] : doc.at(nested).items())
          if ((std::string(nested) == "requires" && k != "gpu_model" && k != "arch") ||
              (std::string(nested) == "measure" && k != "warmup" && k != "min_samples" && k != "max_samples" &&
               k != "max_time_ms" && k != "noise_target" && k != "cold"))
            return Status::invalid(std::string("unknown key '") + k + "' in '" + nested + "'; see coordinator/CAMPAIGNS.md");
    if (doc.contains("requires")) {
      base.requires_.gpu_model = doc["requires"].value("gpu_model", "");
      base.requires_.arch = doc["requires"].value("arch", "");
    }
    base.timeout_ms = doc.value("timeout_ms", base.timeout_ms);
    if (base.timeout_ms <= 0) return Status::invalid("'timeout_ms' must be positive");
    if (doc.contains("measure")) base.measure = doc.at("measure").get<MeasureOptions>();
    const std::string description = doc.value("description", doc.contains("source") ? "custom source" : "starter source");

    PlannedCampaign p;
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
    p.record.campaign_id = campaign_id;
    p.record.name = doc.value("name", type + "-" + backend_s);
    p.record.definition = doc;
    p.record.definition.erase("source");  // kept once per job; the campaign record stays small
    p.record.job_count = static_cast<int64_t>(p.jobs.size());
    p.record.submitted_wall_ms = wall_ms;
    return p;
  } catch (const std::exception& e) {
    return Status::invalid(std::string("campaign does not match its schema: ") + e.what());
  }
}

}  // namespace ak
