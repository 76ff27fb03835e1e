#include "common/result_fields.h"

#include <cstdio>

namespace ak {

const std::vector<ResultColumn>& result_columns() {
  static const std::vector<ResultColumn> cols = {
      {"experiment", "", "1-based order in which results were stored"},
      {"tag", "", "campaign-given tag of the job"},
      {"kernel_type", "", "kernel type, e.g. softmax"},
      {"throughput_tflops", "TFLOP/s", "minimum FLOPs of the op over the median latency"},
      {"latency_us", "us", "median kernel time"},
      {"pct_peak", "%",
       "achieved rate over the worker's measured ceiling of the binding resource (copy bandwidth or GEMM rate); empty "
       "for a memory-bound call whose working set was cache-resident"},
      {"speedup_vs_pytorch", "x", "PyTorch op median over candidate median, same sandbox, same run"},
      {"correctness", "", "result status"},
      {"peak_vram_mb", "MB", "peak device memory allocated in the sandbox during the job"},
      {"description", "", "what the candidate is"},
      {"job_id", "", "job identifier"},
      {"attempt", "", "delivery attempt that produced the row"},
      {"gpu", "", "device name of the worker (cpu for the CPU backend)"},
      {"worker", "", "worker id"},
      {"shape", "", "problem shape, e.g. 4096x4096"},
      {"dtype", "", "fp32, fp16 or bf16"},
      {"config", "", "tunables, NAME=value,..."},
      {"source_hash", "", "xxh64 of the candidate source"},
      {"backend", "", "cpu, cuda or triton"},
      {"baseline_us", "us", "median of the PyTorch op"},
      {"bandwidth_gbps", "GB/s", "minimum bytes of the op over the median latency"},
      {"samples", "", "timed samples of the candidate"},
      {"cv", "", "coefficient of variation of the candidate samples"},
      {"compile_ms", "ms", "compile time of the candidate, 0 on a cache hit"},
      {"cold_l2", "", "true when the L2 was flushed before every timed sample"},
      {"rel_se", "", "relative standard error of the candidate median when sampling stopped"},
      {"max_abs_error", "", "largest |candidate - reference| seen in verification"},
      {"verification", "", "every verification stage: name, verdict, checks, worst error"},
      {"flops", "FLOP", "minimum FLOPs of one call"},
      {"bytes", "B", "minimum bytes moved by one call"},
      {"bound", "", "memory or compute: which ceiling binds at this arithmetic intensity"},
      {"pct_peak_datasheet", "%", "achieved rate over the datasheet ceiling of the binding resource"},
      {"peak_tflops", "TFLOP/s", "the worker's measured GEMM ceiling for the dtype"},
      {"input_sets", "", "input sets the timed calls rotated over"},
      {"audit_us", "us", "time of the audited last timed call, whose output was re-verified"},
      {"stop_reason", "", "why sampling stopped: noise_target, max_samples or time_limit"},
      {"sm_clock_mhz", "MHz", "SM clock right after sampling (NVML)"},
      {"power_w", "W", "board power right after sampling (NVML)"},
      {"temperature_c", "C", "GPU temperature right after sampling (NVML)"},
      {"clock_reasons", "", "NVML clock-event reasons seen before or after sampling"},
      {"throttled", "", "true when a power, thermal or hardware slowdown reason was active"},
      {"stage", "", "stage of a failure"},
      {"reason", "", "why the job did not pass"},
      {"campaign_id", "", "campaign of the job"},
      {"completed_wall_ms", "ms", "when the worker finished the attempt (Unix epoch)"},
  };
  return cols;
}

nlohmann::json result_row(const JobRecord& job, const ResultRecord& r, int64_t experiment) {
  const bool pass = r.status == ResultStatus::kPass;
  auto fig = [&](double v) { return pass ? nlohmann::json(v) : nlohmann::json(nullptr); };
  // A memory-bound call served from cache has no ceiling to be a percentage of (common/job.h).
  const bool no_ceiling = r.m.cache_resident && r.m.bound == "memory";
  auto pct = [&](double v) { return no_ceiling ? nlohmann::json(nullptr) : fig(v); };
  nlohmann::json row = {
      {"experiment", experiment},
      {"tag", job.spec.tag},
      {"kernel_type", job.spec.kernel_type},
      {"throughput_tflops", fig(r.m.throughput_tflops)},
      {"latency_us", fig(r.m.latency_us)},
      {"pct_peak", pct(r.m.pct_peak)},
      {"speedup_vs_pytorch", fig(r.m.speedup)},
      {"correctness", result_status_name(r.status)},
      {"peak_vram_mb", fig(r.m.peak_vram_mb)},
      {"description", job.spec.description},
      {"job_id", r.job_id},
      {"attempt", r.attempt},
      {"gpu", r.gpu},
      {"worker", r.worker_id},
      {"shape", shape_string(job.spec.shape)},
      {"dtype", dtype_name(job.spec.dtype)},
      {"config", config_string(job.spec.config)},
      {"source_hash", r.source_hash},
      {"backend", backend_name(job.spec.requires_.backend)},
      {"baseline_us", fig(r.m.baseline_us)},
      {"bandwidth_gbps", fig(r.m.bandwidth_gbps)},
      {"samples", fig(r.m.samples)},
      {"cv", fig(r.m.cv)},
      {"compile_ms", r.m.compile_ms},
      {"cold_l2", pass ? nlohmann::json(r.m.cold_l2) : nlohmann::json(nullptr)},
      {"rel_se", fig(r.m.rel_se)},
      {"max_abs_error", r.m.max_abs_error},
      {"verification", r.m.verification},
      {"flops", fig(r.m.flops)},
      {"bytes", fig(r.m.bytes)},
      {"bound", pass ? nlohmann::json(r.m.bound) : nlohmann::json(nullptr)},
      {"pct_peak_datasheet", pct(r.m.pct_peak_datasheet)},
      {"peak_tflops", fig(r.m.peak_tflops)},
      {"input_sets", fig(r.m.input_sets)},
      {"audit_us", fig(r.m.audit_us)},
      {"stop_reason", pass ? nlohmann::json(r.m.stop_reason) : nlohmann::json(nullptr)},
      {"sm_clock_mhz", fig(r.m.sm_clock_mhz)},
      {"power_w", fig(r.m.power_w)},
      {"temperature_c", fig(r.m.temperature_c)},
      {"clock_reasons", pass ? nlohmann::json(r.m.clock_reasons) : nlohmann::json(nullptr)},
      {"throttled", pass ? nlohmann::json(r.m.throttled) : nlohmann::json(nullptr)},
      {"stage", r.stage},
      {"reason", r.reason},
      {"campaign_id", job.spec.campaign_id},
      {"completed_wall_ms", r.completed_wall_ms},
  };
  // Not a TSV column: a new column would make every results.tsv written before it refuse the
  // append (cli/format.h); an empty pct_peak there says as much. docs/RESULTS.md has both.
  if (pass) row["cache_resident"] = r.m.cache_resident;
  // KernelBench jobs: the task (problem, sample, baseline mode) and what the harness said, for
  // the JSON export and `autokernel kb`; not a TSV column (the table in result_fields.h).
  if (const auto& t = job.spec.kernelbench) {
    nlohmann::json kb = r.kernelbench.is_object() ? r.kernelbench : nlohmann::json::object();
    kb["task"] = {{"mode", t->mode},           {"level", t->level},       {"problem_id", t->problem_id},
                  {"problem_name", t->problem_name}, {"sample_id", t->sample_id}, {"backend", t->backend},
                  {"precision", t->precision}, {"compile", t->compile},   {"compile_mode", t->compile_mode}};
    row["kernelbench"] = std::move(kb);
  }
  // Model jobs: the profile (models/README.md), for the JSON export and `autokernel profile`.
  if (job.spec.model && r.model.is_object()) row["model"] = r.model;
  return row;
}

std::string tsv_header() {
  std::string s;
  for (const auto& c : result_columns()) {
    if (!s.empty()) s += '\t';
    s += c.name;
  }
  return s;
}

namespace {
std::string cell(const nlohmann::json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    for (auto& ch : s)
      if (ch == '\t' || ch == '\n' || ch == '\r') ch = ' ';
    return s;
  }
  if (v.is_number_float()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", v.get<double>());
    return buf;
  }
  return v.dump();
}
}  // namespace

std::string tsv_line(const nlohmann::json& row) {
  std::string s;
  bool first = true;
  for (const auto& c : result_columns()) {
    if (!first) s += '\t';
    first = false;
    s += row.contains(c.name) ? cell(row.at(c.name)) : "";
  }
  return s;
}

}  // namespace ak
