// Sample records for the tests of common/: every field set to a value other than its default, so
// a round trip that drops a field shows up as a difference.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/job.h"
#include "common/tuning.h"

namespace ak::testing {

inline JobSpec sample_spec(const std::string& job_id = "job-1") {
  JobSpec s;
  s.job_id = job_id;
  s.campaign_id = "camp-1";
  s.kernel_type = "softmax";
  s.source = "extern \"C\" __global__ void k(float* x) { x[0] = 1.f; }\n";
  s.config = {{"VEC", 4}, {"BLOCK", 256}};
  s.shape = {1024, 4096};
  s.dtype = DType::kBF16;
  s.requires_ = {Backend::kCuda, "NVIDIA H200", "sm_90a"};
  s.timeout_ms = 12'345;
  s.measure = {5, 20, 300, 2500, 0.01, false};
  s.tag = "softmax-bf16";
  s.description = "row softmax, 4-wide loads";
  return s;
}

inline Capabilities sample_caps() {
  Capabilities c;
  c.hostname = "gpu-node-3";
  c.gpu_name = "NVIDIA H200";
  c.pci_id = "0000:19:00.0";
  c.pci_device_id = "10de:2335";
  c.compute_capability = "9.0";
  c.arch = "sm_90a";
  c.sm_count = 132;
  c.memory_bytes = 150'000'000'000;
  c.device_index = 2;
  c.backends = {Backend::kCuda, Backend::kCpu};
  c.ceilings.copy_bandwidth_gbps = 4195.5;
  c.ceilings.gemm_tflops = {{"fp16", 712.5}, {"bf16", 705.25}, {"tf32", 360.5}, {"fp32", 51.25}};
  c.ceilings.datasheet_name = "NVIDIA H200 SXM 141GB";
  c.ceilings.datasheet_match = "pci device id 10de:2335";
  c.ceilings.datasheet_bandwidth_gbps = 4800;
  c.ceilings.datasheet_tflops = {{"fp16", 989.5}, {"bf16", 989.5}, {"tf32", 494.5}, {"fp32", 67}};
  return c;
}

inline Measurement sample_measurement() {
  Measurement m;
  m.latency_us = 10.5;
  m.mean_us = 10.75;
  m.p10_us = 10.25;
  m.p90_us = 11.5;
  m.cv = 0.03125;
  m.samples = 117;
  m.baseline_us = 21.0;
  m.speedup = 2.0;
  m.throughput_tflops = 0.5;
  m.bandwidth_gbps = 3200.25;
  m.pct_peak = 71.5;
  m.peak_bandwidth_gbps = 4475.5;
  m.max_abs_error = 0.0009765625;
  m.peak_vram_mb = 64.5;
  m.compile_ms = 812.25;
  m.cold_l2 = true;
  m.rel_se = 0.0049;
  m.flops = 8.0e7;
  m.bytes = 6.4e7;
  m.peak_tflops = 712.5;
  m.datasheet_bandwidth_gbps = 4800;
  m.datasheet_tflops = 989.5;
  m.pct_peak_datasheet = 66.75;
  m.bound = "memory";
  m.cache_resident = true;
  m.verification = "smoke PASS 1 3e-08; sweep PASS 3 6e-08";
  m.input_sets = 4;
  m.audit_us = 10.25;
  m.blocking_kernel = true;
  m.stop_reason = "noise_target";
  m.baseline_p10_us = 20.5;
  m.baseline_p90_us = 21.5;
  m.sm_clock_mhz = 1980;
  m.mem_clock_mhz = 3201;
  m.power_w = 412.5;
  m.temperature_c = 41;
  m.clock_reasons = "sw_power_cap";
  m.throttled = true;
  return m;
}

inline ResultRecord sample_result(const std::string& job_id = "job-1", int attempt = 2) {
  ResultRecord r;
  r.job_id = job_id;
  r.attempt = attempt;
  r.status = ResultStatus::kTimeout;
  r.stage = "measure";
  r.reason = "sandbox did not answer within 12345 ms";
  r.m = sample_measurement();
  r.worker_id = "w-gpu-node-3-2";
  r.gpu = "NVIDIA H200";
  r.source_hash = "0123456789abcdef";
  r.options_hash = "fedcba9876543210";
  r.completed_wall_ms = 1'700'000'000'123;
  r.attempt_reasons = {"attempt 1: lease expired", "attempt 2: timeout"};
  return r;
}

inline JobRecord sample_job(const std::string& job_id = "job-1") {
  JobRecord j;
  j.spec = sample_spec(job_id);
  j.state = JobState::kLeased;
  j.attempt = 3;
  j.worker_id = "w-gpu-node-3-2";
  j.lease_expires_ms = 1'234'567;
  j.orphaned_wall_ms = 1'700'000'000'456;
  j.attempt_reasons = {"attempt 1: crash", "attempt 2: lease expired"};
  j.submitted_wall_ms = 1'700'000'000'000;
  return j;
}

inline CampaignRecord sample_campaign(const std::string& id = "camp-1") {
  CampaignRecord c;
  c.campaign_id = id;
  c.name = "softmax sweep";
  c.definition = {{"kernel", "softmax"}, {"shapes", {{1024, 4096}, {8, 128}}}, {"gpus", {"NVIDIA H200"}}};
  c.job_count = 42;
  c.submitted_wall_ms = 1'700'000'000'000;
  return c;
}

// The tuning entry a passing sample_result makes, with its latency set.
inline TunedEntry sample_tuned(double latency_us = 10.5, const std::string& job_id = "job-1") {
  ResultRecord r = sample_result(job_id);
  r.status = ResultStatus::kPass;
  r.m.latency_us = latency_us;
  const Capabilities caps = [] {
    Capabilities c = sample_caps();
    c.versions = {{"torch", "2.11.0+cu130"}, {"cuda_driver", "13.0"}, {"nvidia_driver", "580.159.04"}};
    return c;
  }();
  return *tuned_entry_from(sample_job(job_id), r, &caps);
}

// Records compare through their JSON form: the structs have no operator==, and the JSON form is
// what is stored and sent.
template <typename T>
nlohmann::json as_json(const T& v) {
  return nlohmann::json(v);
}

}  // namespace ak::testing
