#include "coordinator/model_campaign.h"

#include <cctype>
#include <set>

#include "common/tuning.h"

namespace ak {

using nlohmann::json;

namespace {

const std::set<std::string> kKeys = {"kind",        "name",  "task",    "model",   "model_code",    "backend",
                                     "gpu_models",  "dtype", "compile", "iters",   "warmup",        "timeout_ms",
                                     "description", "tag",   "tuned",   "targets", "decode_tokens", "min_speedup"};
constexpr size_t kMaxTuned = 1024;  // tuned kernels of one verify job

bool plain(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  return true;
}

}  // namespace

std::string check_model_name(const std::string& model) {
  if (model.rfind("examples/", 0) == 0) {
    const std::string rest = model.substr(9);
    const size_t colon = rest.find(':');
    if (!plain(rest.substr(0, colon)) || (colon != std::string::npos && !plain(rest.substr(colon + 1))))
      return "an example is named examples/NAME or examples/NAME:CONFIG (letters, digits, '_', '-', '.')";
    return "";
  }
  if (model.rfind("hf:", 0) == 0) return plain(model.substr(3)) ? "" : "a Hugging Face model is named hf:ARCH";
  if (model.size() > 3 && model.compare(model.size() - 3, 3, ".py") == 0 && plain(model)) return "";
  return "expected examples/NAME[:CONFIG], hf:ARCH or a model file's name ending in .py (no folders)";
}

Result<PlannedCampaign> plan_model_campaign(const json& doc, const std::string& campaign_id, int64_t wall_ms,
                                            const PlanLimits& limits) {
  if (Status s = check_keys(doc, kKeys, "a model campaign", "coordinator/model_campaign.h"); !s.ok()) return s;
  try {
    const std::string task = doc.value("task", "profile");
    if (task != "profile" && task != "verify")
      return Status::invalid("'task' must be \"profile\" or \"verify\", got \"" + task + "\"");
    const bool verify = task == "verify";
    for (const char* k : {"tuned", "targets", "decode_tokens", "min_speedup"})
      if (!verify && doc.contains(k)) return Status::invalid(std::string("'") + k + "' is for a verify task");
    const std::string b = doc.value("backend", "cuda");
    auto backend = parse_backend(b);
    if (!backend || *backend == Backend::kTriton)
      return Status::invalid("'backend' (the workers that run it) must be cuda or cpu, got \"" + b + "\"");
    std::vector<std::string> models;
    if (doc.contains("gpu_models")) models = doc["gpu_models"].get<std::vector<std::string>>();
    if (models.empty()) models.push_back("");
    if (*backend == Backend::kCpu && (models.size() != 1 || !models[0].empty()))
      return Status::invalid("'gpu_models' names GPU models; a cpu campaign runs on cpu workers");
    if (int64_t(models.size()) > limits.max_jobs)
      return Status::invalid("model campaign plans " + std::to_string(models.size()) +
                             " jobs; this coordinator accepts at most " + std::to_string(limits.max_jobs));

    ModelTask t;
    t.action = task;
    if (!doc.contains("model")) return Status::invalid("a model campaign needs 'model' (models/README.md)");
    t.model = doc.at("model").get<std::string>();
    if (std::string why = check_model_name(t.model); !why.empty())
      return Status::invalid("'model' \"" + t.model + "\": " + why);
    t.model_code = doc.value("model_code", std::string());
    const bool file = t.model.rfind("examples/", 0) != 0 && t.model.rfind("hf:", 0) != 0;
    if (file && t.model_code.empty())
      return Status::invalid("'model' \"" + t.model + "\" names a file: its text goes in 'model_code'");
    if (!file && !t.model_code.empty())
      return Status::invalid("'model_code' is only for a model file; \"" + t.model + "\" is built in");
    t.dtype = doc.value("dtype", t.dtype);
    if (t.dtype != "fp32" && t.dtype != "fp16" && t.dtype != "bf16")
      return Status::invalid("'dtype' must be fp32, fp16 or bf16, got \"" + t.dtype + "\"");
    if (verify) {
      // Verify times eager, torch.compile and the tuned model, 20 rounds after 5 by default.
      t.compile = true;
      t.iters = 20;
      t.warmup = 5;
      if (!doc.contains("tuned"))
        return Status::invalid("a verify task needs 'tuned': the tuned kernels (autokernel best --export)");
      // The export's document or its entries.
      const json& tuned =
          doc["tuned"].is_object() && doc["tuned"].contains("entries") ? doc["tuned"]["entries"] : doc["tuned"];
      if (!tuned.is_array()) return Status::invalid("'tuned' must be a list of tuning entries or an export");
      if (tuned.size() > kMaxTuned)
        return Status::invalid("'tuned' has " + std::to_string(tuned.size()) + " entries; at most " +
                               std::to_string(kMaxTuned));
      for (size_t i = 0; i < tuned.size(); ++i) {
        try {
          (void)tuned[i].get<TunedEntry>();
        } catch (const json::exception& e) {
          return Status::invalid("'tuned' entry " + std::to_string(i) + " is not a tuning entry: " + e.what());
        }
      }
      t.tuned = tuned;
      t.targets = doc.value("targets", json::array());
      if (!t.targets.is_array()) return Status::invalid("'targets' must be the profile's list of targets");
      t.decode_tokens = doc.value("decode_tokens", t.decode_tokens);
      if (t.decode_tokens < 0 || t.decode_tokens > 1024) return Status::invalid("'decode_tokens' must be 0..1024");
      t.min_speedup = doc.value("min_speedup", t.min_speedup);
      if (!(t.min_speedup >= 0)) return Status::invalid("'min_speedup' must be >= 0");
    }
    t.compile = doc.value("compile", t.compile);
    t.iters = doc.value("iters", t.iters);
    t.warmup = doc.value("warmup", t.warmup);
    if (t.iters < 1 || t.iters > 1000 || t.warmup < 0 || t.warmup > 1000)
      return Status::invalid("'iters' must be 1..1000 and 'warmup' 0..1000");
    auto timeout = read_timeout_ms(doc, 600'000);
    if (!timeout.ok()) return timeout.status();

    PlannedCampaign plan;
    for (size_t g = 0; g < models.size(); ++g) {
      JobSpec j;
      j.campaign_id = campaign_id;
      j.job_id = campaign_id + "-" + task + (models.size() > 1 ? "-g" + std::to_string(g) : "");
      j.kernel_type = "model";
      j.dtype = t.dtype == "fp16" ? DType::kF16 : t.dtype == "bf16" ? DType::kBF16 : DType::kF32;
      j.requires_.backend = *backend;
      j.requires_.gpu_model = models[g];
      j.timeout_ms = *timeout;
      j.tag = doc.value("tag", "model");
      j.description = doc.value("description", task + " " + t.model + " " + t.dtype + (t.compile ? " compile" : ""));
      j.model = t;
      plan.jobs.push_back(std::move(j));
    }
    plan.record = campaign_record(doc, campaign_id, doc.value("name", task + " " + t.model), plan.jobs.size(), wall_ms);
    return plan;
  } catch (const json::exception& e) {
    return Status::invalid(std::string("model campaign does not match its schema: ") + e.what());
  }
}

}  // namespace ak
