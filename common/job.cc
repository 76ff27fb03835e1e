#include "common/job.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace ak {

namespace {
template <typename E, size_t N>
std::optional<E> parse_enum(const std::string& s, const char* const (&names)[N]) {
  for (size_t i = 0; i < N; ++i)
    if (s == names[i]) return static_cast<E>(i);
  return std::nullopt;
}
constexpr const char* kBackendNames[] = {"cpu", "cuda", "triton"};
constexpr const char* kDTypeNames[] = {"fp32", "fp16", "bf16"};
constexpr const char* kJobStateNames[] = {"QUEUED", "LEASED", "DONE", "LOST"};
constexpr const char* kResultStatusNames[] = {"PASS",  "FAIL",     "COMPILE_ERROR", "TIMEOUT",
                                              "CRASH", "REJECTED", "LOST", "CANCELLED"};

template <typename E, size_t N>
E enum_from_json(const nlohmann::json& j, const char* const (&names)[N], const char* what) {
  auto v = parse_enum<E>(j.get<std::string>(), names);
  if (!v) throw nlohmann::json::other_error::create(501, std::string("unknown ") + what + " '" + j.get<std::string>() + "'", &j);
  return *v;
}
}  // namespace

const char* backend_name(Backend b) { return kBackendNames[static_cast<int>(b)]; }
const char* dtype_name(DType d) { return kDTypeNames[static_cast<int>(d)]; }
const char* job_state_name(JobState s) { return kJobStateNames[static_cast<int>(s)]; }
const char* result_status_name(ResultStatus s) { return kResultStatusNames[static_cast<int>(s)]; }
std::optional<Backend> parse_backend(const std::string& s) { return parse_enum<Backend>(s, kBackendNames); }
std::optional<DType> parse_dtype(const std::string& s) { return parse_enum<DType>(s, kDTypeNames); }
std::optional<JobState> parse_job_state(const std::string& s) { return parse_enum<JobState>(s, kJobStateNames); }
std::optional<ResultStatus> parse_result_status(const std::string& s) {
  return parse_enum<ResultStatus>(s, kResultStatusNames);
}
int dtype_bytes(DType d) { return d == DType::kF32 ? 4 : 2; }

void to_json(nlohmann::json& j, const Requirements& v) {
  j = {{"backend", backend_name(v.backend)}, {"gpu_model", v.gpu_model}, {"arch", v.arch}};
}
void from_json(const nlohmann::json& j, Requirements& v) {
  v.backend = enum_from_json<Backend>(j.at("backend"), kBackendNames, "backend");
  v.gpu_model = j.value("gpu_model", "");
  v.arch = j.value("arch", "");
}

void to_json(nlohmann::json& j, const MeasureOptions& v) {
  j = {{"warmup", v.warmup}, {"min_samples", v.min_samples}, {"max_samples", v.max_samples},
       {"max_time_ms", v.max_time_ms}, {"noise_target", v.noise_target}, {"cold", v.cold}};
}
void from_json(const nlohmann::json& j, MeasureOptions& v) {
  MeasureOptions d;
  v.warmup = j.value("warmup", d.warmup);
  v.min_samples = j.value("min_samples", d.min_samples);
  v.max_samples = j.value("max_samples", d.max_samples);
  v.max_time_ms = j.value("max_time_ms", d.max_time_ms);
  v.noise_target = j.value("noise_target", d.noise_target);
  v.cold = j.value("cold", d.cold);
}

void to_json(nlohmann::json& j, const JobSpec& v) {
  j = {{"job_id", v.job_id},
       {"campaign_id", v.campaign_id},
       {"kernel_type", v.kernel_type},
       {"source", v.source},
       {"config", v.config},
       {"shape", v.shape},
       {"dtype", dtype_name(v.dtype)},
       {"requires", v.requires_},
       {"timeout_ms", v.timeout_ms},
       {"measure", v.measure},
       {"tag", v.tag},
       {"description", v.description}};
  if (!v.source_hash.empty()) j["source_hash"] = v.source_hash;
  if (v.study >= 0) j["study"] = v.study;
  if (v.kernelbench) j["kernelbench"] = *v.kernelbench;
  if (v.model) j["model"] = *v.model;
}

void to_json(nlohmann::json& j, const ModelTask& v) {
  j = {{"action", v.action},   {"model", v.model}, {"model_code", v.model_code}, {"dtype", v.dtype},
       {"compile", v.compile}, {"iters", v.iters}, {"warmup", v.warmup}};
  if (v.action == "verify") {
    j["tuned"] = v.tuned;
    j["targets"] = v.targets;
    j["decode_tokens"] = v.decode_tokens;
    j["min_speedup"] = v.min_speedup;
  }
}
void from_json(const nlohmann::json& j, ModelTask& v) {
  const ModelTask d;
  v.action = j.value("action", d.action);
  v.model = j.at("model").get<std::string>();
  v.model_code = j.value("model_code", d.model_code);
  v.dtype = j.value("dtype", d.dtype);
  v.compile = j.value("compile", d.compile);
  v.iters = j.value("iters", d.iters);
  v.warmup = j.value("warmup", d.warmup);
  v.tuned = j.value("tuned", nlohmann::json::array());
  v.targets = j.value("targets", nlohmann::json::array());
  v.decode_tokens = j.value("decode_tokens", d.decode_tokens);
  v.min_speedup = j.value("min_speedup", d.min_speedup);
}

void to_json(nlohmann::json& j, const KernelBenchTask& v) {
  j = {{"mode", v.mode},
       {"level", v.level},
       {"problem_id", v.problem_id},
       {"problem_name", v.problem_name},
       {"problem_code", v.problem_code},
       {"sample_id", v.sample_id},
       {"backend", v.backend},
       {"precision", v.precision},
       {"compile", v.compile},
       {"compile_mode", v.compile_mode},
       {"num_correct_trials", v.num_correct_trials},
       {"num_perf_trials", v.num_perf_trials},
       {"seed", v.seed},
       {"strict", v.strict},
       {"switches", v.switches}};
}
void from_json(const nlohmann::json& j, KernelBenchTask& v) {
  const KernelBenchTask d;
  v.mode = j.value("mode", d.mode);
  v.level = j.at("level").get<int>();
  v.problem_id = j.at("problem_id").get<int>();
  v.problem_name = j.at("problem_name").get<std::string>();
  v.problem_code = j.at("problem_code").get<std::string>();
  v.sample_id = j.value("sample_id", d.sample_id);
  v.backend = j.value("backend", d.backend);
  v.precision = j.value("precision", d.precision);
  v.compile = j.value("compile", d.compile);
  v.compile_mode = j.value("compile_mode", d.compile_mode);
  v.num_correct_trials = j.value("num_correct_trials", d.num_correct_trials);
  v.num_perf_trials = j.value("num_perf_trials", d.num_perf_trials);
  v.seed = j.value("seed", d.seed);
  v.strict = j.value("strict", d.strict);
  v.switches = j.value("switches", nlohmann::json::object());
}
void from_json(const nlohmann::json& j, JobSpec& v) {
  v.job_id = j.at("job_id").get<std::string>();
  v.campaign_id = j.value("campaign_id", "");
  v.kernel_type = j.at("kernel_type").get<std::string>();
  v.source = j.at("source").get<std::string>();
  v.source_hash = j.value("source_hash", "");
  v.config = j.value("config", std::map<std::string, int64_t>{});
  v.shape = j.at("shape").get<std::vector<int64_t>>();
  v.dtype = enum_from_json<DType>(j.at("dtype"), kDTypeNames, "dtype");
  v.requires_ = j.at("requires").get<Requirements>();
  v.timeout_ms = j.value("timeout_ms", int64_t{60'000});
  v.measure = j.value("measure", MeasureOptions{});
  v.tag = j.value("tag", "");
  v.description = j.value("description", "");
  v.study = j.value("study", -1);
  if (j.contains("kernelbench")) v.kernelbench = j.at("kernelbench").get<KernelBenchTask>();
  if (j.contains("model")) v.model = j.at("model").get<ModelTask>();
}

void to_json(nlohmann::json& j, const Capabilities& v) {
  std::vector<std::string> b;
  for (auto x : v.backends) b.push_back(backend_name(x));
  j = {{"hostname", v.hostname},   {"gpu_name", v.gpu_name}, {"pci_id", v.pci_id},
       {"pci_device_id", v.pci_device_id},
       {"compute_capability", v.compute_capability},
       {"arch", v.arch},           {"sm_count", v.sm_count}, {"memory_bytes", v.memory_bytes},
       {"device_index", v.device_index}, {"backends", b}, {"ceilings", v.ceilings}};
  if (v.shared_memory_per_block_bytes > 0) j["shared_memory_per_block_bytes"] = v.shared_memory_per_block_bytes;
  if (!v.versions.empty()) j["versions"] = v.versions;
}
void from_json(const nlohmann::json& j, Capabilities& v) {
  v.hostname = j.value("hostname", "");
  v.gpu_name = j.at("gpu_name").get<std::string>();
  v.pci_id = j.value("pci_id", "");
  v.pci_device_id = j.value("pci_device_id", "");
  v.compute_capability = j.value("compute_capability", "");
  v.arch = j.value("arch", "");
  v.sm_count = j.value("sm_count", 0);
  v.memory_bytes = j.value("memory_bytes", int64_t{0});
  v.shared_memory_per_block_bytes = j.value("shared_memory_per_block_bytes", int64_t{0});
  v.device_index = j.value("device_index", -1);
  v.backends.clear();
  for (const auto& b : j.at("backends")) v.backends.push_back(enum_from_json<Backend>(b, kBackendNames, "backend"));
  v.ceilings = j.value("ceilings", Ceilings{});
  v.versions = j.value("versions", std::map<std::string, std::string>{});
}

void to_json(nlohmann::json& j, const Ceilings& v) {
  j = {{"copy_bandwidth_gbps", v.copy_bandwidth_gbps},
       {"gemm_tflops", v.gemm_tflops},
       {"datasheet_name", v.datasheet_name},
       {"datasheet_match", v.datasheet_match},
       {"datasheet_bandwidth_gbps", v.datasheet_bandwidth_gbps},
       {"datasheet_tflops", v.datasheet_tflops},
       {"cache_bytes", v.cache_bytes}};
}
void from_json(const nlohmann::json& j, Ceilings& v) {
  v.copy_bandwidth_gbps = j.value("copy_bandwidth_gbps", 0.0);
  v.gemm_tflops = j.value("gemm_tflops", std::map<std::string, double>{});
  v.datasheet_name = j.value("datasheet_name", "");
  v.datasheet_match = j.value("datasheet_match", "");
  v.datasheet_bandwidth_gbps = j.value("datasheet_bandwidth_gbps", 0.0);
  v.datasheet_tflops = j.value("datasheet_tflops", std::map<std::string, double>{});
  v.cache_bytes = j.value("cache_bytes", int64_t{0});
}

// clang-format off
#define AK_M_FIELDS(X)                                                                                  \
  X(latency_us) X(mean_us) X(p10_us) X(p90_us) X(cv) X(samples) X(baseline_us) X(speedup)              \
  X(throughput_tflops) X(bandwidth_gbps) X(pct_peak) X(peak_bandwidth_gbps) X(max_abs_error)           \
  X(peak_vram_mb) X(compile_ms) X(cold_l2) X(rel_se) X(flops) X(bytes) X(peak_tflops)                  \
  X(datasheet_bandwidth_gbps) X(datasheet_tflops) X(pct_peak_datasheet) X(bound) X(cache_resident)     \
  X(verification) X(input_sets) X(audit_us) X(blocking_kernel) X(stop_reason) X(baseline_p10_us)       \
  X(baseline_p90_us) X(sm_clock_mhz) X(mem_clock_mhz) X(power_w) X(temperature_c)                      \
  X(clock_reasons) X(throttled)
// clang-format on

void to_json(nlohmann::json& j, const Measurement& v) {
  j = nlohmann::json::object();
#define X(f) j[#f] = v.f;
  AK_M_FIELDS(X)
#undef X
}
void from_json(const nlohmann::json& j, Measurement& v) {
#define X(f) v.f = j.value(#f, decltype(v.f){});
  AK_M_FIELDS(X)
#undef X
}

void to_json(nlohmann::json& j, const ResultRecord& v) {
  j = {{"job_id", v.job_id},
       {"attempt", v.attempt},
       {"status", result_status_name(v.status)},
       {"stage", v.stage},
       {"reason", v.reason},
       {"measurement", v.m},
       {"worker_id", v.worker_id},
       {"gpu", v.gpu},
       {"source_hash", v.source_hash},
       {"options_hash", v.options_hash},
       {"completed_wall_ms", v.completed_wall_ms},
       {"attempt_reasons", v.attempt_reasons}};
  if (!v.kernelbench.is_null()) j["kernelbench"] = v.kernelbench;
  if (!v.model.is_null()) j["model"] = v.model;
}
void from_json(const nlohmann::json& j, ResultRecord& v) {
  v.job_id = j.at("job_id").get<std::string>();
  v.attempt = j.at("attempt").get<int>();
  v.status = enum_from_json<ResultStatus>(j.at("status"), kResultStatusNames, "result status");
  v.stage = j.value("stage", "");
  v.reason = j.value("reason", "");
  v.m = j.value("measurement", Measurement{});
  v.worker_id = j.value("worker_id", "");
  v.gpu = j.value("gpu", "");
  v.source_hash = j.value("source_hash", "");
  v.options_hash = j.value("options_hash", "");
  v.completed_wall_ms = j.value("completed_wall_ms", int64_t{0});
  v.attempt_reasons = j.value("attempt_reasons", std::vector<std::string>{});
  v.kernelbench = j.value("kernelbench", nlohmann::json());
  v.model = j.value("model", nlohmann::json());
}

void to_json(nlohmann::json& j, const JobRecord& v) {
  j = {{"spec", v.spec},
       {"state", job_state_name(v.state)},
       {"attempt", v.attempt},
       {"worker_id", v.worker_id},
       {"lease_expires_ms", v.lease_expires_ms},
       {"orphaned_wall_ms", v.orphaned_wall_ms},
       {"attempt_reasons", v.attempt_reasons},
       {"submitted_wall_ms", v.submitted_wall_ms}};
}
void from_json(const nlohmann::json& j, JobRecord& v) {
  v.spec = j.at("spec").get<JobSpec>();
  v.state = enum_from_json<JobState>(j.at("state"), kJobStateNames, "job state");
  v.attempt = j.value("attempt", 0);
  v.worker_id = j.value("worker_id", "");
  v.lease_expires_ms = j.value("lease_expires_ms", int64_t{0});
  v.orphaned_wall_ms = j.value("orphaned_wall_ms", int64_t{0});
  v.attempt_reasons = j.value("attempt_reasons", std::vector<std::string>{});
  v.submitted_wall_ms = j.value("submitted_wall_ms", int64_t{0});
}

void to_json(nlohmann::json& j, const CampaignRecord& v) {
  j = {{"campaign_id", v.campaign_id}, {"name", v.name}, {"definition", v.definition},
       {"job_count", v.job_count}, {"submitted_wall_ms", v.submitted_wall_ms}};
  if (v.cancelled) {
    j["cancelled"] = true;
    j["cancel_reason"] = v.cancel_reason;
  }
  if (!v.owner.empty()) j["owner"] = v.owner;
}
void from_json(const nlohmann::json& j, CampaignRecord& v) {
  v.campaign_id = j.at("campaign_id").get<std::string>();
  v.name = j.value("name", "");
  v.definition = j.value("definition", nlohmann::json::object());
  v.job_count = j.value("job_count", int64_t{0});
  v.submitted_wall_ms = j.value("submitted_wall_ms", int64_t{0});
  v.cancelled = j.value("cancelled", false);
  v.cancel_reason = j.value("cancel_reason", std::string());
  v.owner = j.value("owner", std::string());
}

bool same_gpu_model(const std::string& a, const std::string& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](unsigned char x, unsigned char y) {
           return std::tolower(x) == std::tolower(y);
         });
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(shape[i]);
  }
  return s;
}

std::string config_string(const std::map<std::string, int64_t>& config) {
  std::string s;
  for (const auto& [k, v] : config) {
    if (!s.empty()) s += ',';
    s += k + "=" + std::to_string(v);
  }
  return s;
}

}  // namespace ak
