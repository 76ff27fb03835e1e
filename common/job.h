// The data model shared by coordinator and worker: jobs, capabilities, results.
//
// A JobSpec is one experiment: one candidate (source text + tunable config) for one target (kernel
// type, shape, dtype) on one backend. A JobRecord is the coordinator's view of a job's lifecycle;
// a ResultRecord is the outcome of one delivered attempt. All of these are plain values with JSON
// (de)serialisation; from_json throws nlohmann::json::exception on a malformed document, and the
// protocol layer (common/protocol.h) turns that into an error reply. Field names and units of
// results are listed in common/result_fields.h and documented in common/PROTOCOL.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ak {

// kTriton: Triton sources compiled ahead of time to a cubin (worker/triton/compile.py) and run on
// a CUDA device by the same sandbox as kCuda.
enum class Backend { kCpu = 0, kCuda = 1, kTriton = 2 };
enum class DType { kF32 = 0, kF16 = 1, kBF16 = 2 };
enum class JobState { kQueued = 0, kLeased = 1, kDone = 2, kLost = 3 };
enum class ResultStatus {
  kPass = 0,
  kFail,          // ran, but the output is wrong
  kCompileError,
  kTimeout,       // the sandbox did not answer within the job's timeout and was killed
  kCrash,         // the sandbox died (signal, CUDA fault, abort)
  kRejected,      // a detected cheat (issue "Trustworthy measurement")
  kLost,          // the coordinator gave up after too many attempts
  kCancelled,     // its campaign was cancelled before the job finished (autokernel cancel)
};

const char* backend_name(Backend b);      // "cpu", "cuda", "triton"
const char* dtype_name(DType d);          // "fp32", "fp16", "bf16"
const char* job_state_name(JobState s);   // "QUEUED", ...
const char* result_status_name(ResultStatus s);  // "PASS", ...
std::optional<Backend> parse_backend(const std::string& s);
std::optional<DType> parse_dtype(const std::string& s);
std::optional<JobState> parse_job_state(const std::string& s);
std::optional<ResultStatus> parse_result_status(const std::string& s);
int dtype_bytes(DType d);

// What a job needs from a worker. Empty strings match any worker.
struct Requirements {
  Backend backend = Backend::kCpu;
  std::string gpu_model;  // e.g. "NVIDIA H200"; compared case-insensitively with Capabilities::gpu_name
  std::string arch;       // e.g. "sm_90a"; compared with Capabilities::arch
};

// How the sandbox times a candidate (the simple version; issue 3 deepens it).
struct MeasureOptions {
  int warmup = 3;
  int min_samples = 10;
  int max_samples = 200;
  int64_t max_time_ms = 1000;  // stop sampling after this much measurement time
  // Stop early once the relative standard error of the median of both candidate and baseline
  // is at most this (1.2533 * stdev / sqrt(n) / median); 0 disables the rule.
  double noise_target = 0.005;
  // Flush the device's L2 (write a buffer of twice its size) before every timed sample, outside
  // the timed region, so that inputs come from device memory. The CPU backend times hot.
  bool cold = true;
};

// A KernelBench job (kernelbench/): one problem's baseline timing or one candidate sample, run by
// the worker's KernelBench harness (kernelbench/harness/, HARNESS.md) instead of the kernel
// sandbox. The candidate's code is JobSpec::source; JobSpec::kernel_type is "kernelbench".
struct KernelBenchTask {
  std::string mode = "candidate";  // "candidate" | "baseline"
  int level = 0;
  int problem_id = 0;
  std::string problem_name;        // the file name, "1_Square_matrix_multiplication_.py"
  std::string problem_code;
  int sample_id = 0;               // candidate mode
  std::string backend = "cuda";    // the candidate's: "cuda" (load_inline), "triton", "torch"
  std::string precision = "fp32";  // "fp32" | "fp16" | "bf16", KernelBench's precision argument
  bool compile = false;            // baseline mode: torch.compile (inductor) instead of eager
  std::string compile_mode = "default";
  int num_correct_trials = 5;
  int num_perf_trials = 100;
  int64_t seed = 42;
  bool strict = true;              // the strict checks beside the faithful verdict
  nlohmann::json switches = nlohmann::json::object();  // the harness's deviation switches
};

// A model job (models/README.md): the model pipeline's Python on a worker, instead of the kernel
// sandbox. JobSpec::kernel_type is "model"; JobSpec::source is empty (the model's own file, when
// it names one, travels in model_code).
struct ModelTask {
  std::string action = "profile";  // "profile" | "verify"
  std::string model;               // "examples/NAME[:CONFIG]", "hf:ARCH", or a file's name (then model_code)
  std::string model_code;          // the user's model file, when `model` names one
  std::string dtype = "bf16";      // "fp32" | "fp16" | "bf16": the model's parameters and inputs
  // profile: profile torch.compile(model) instead of eager; verify: also time torch.compile(model).
  bool compile = false;
  int iters = 5;   // profiled (verify: timed) iterations
  int warmup = 3;  // iterations before
  // verify only (JSON keys written when set):
  // "tuned": the tuned kernels to plug in, entries of the tuning database export (common/tuning.h
  // TunedEntry); the worker uses those of its own GPU model and backend.
  nlohmann::json tuned = nlohmann::json::array();
  // "targets": the profile's targets (their shares), for the Amdahl prediction; may be empty.
  nlohmann::json targets = nlohmann::json::array();
  int decode_tokens = 32;  // greedy decoding check for a language model; 0: none
  // Plug in only kernels whose tuned speedup over PyTorch's op (as the sandbox measured it) is
  // above this; 0 plugs every kernel (a correctness check of all of them).
  double min_speedup = 1.0;
};

struct JobSpec {
  std::string job_id;
  std::string campaign_id;
  std::string kernel_type;                 // registry name, e.g. "softmax"
  std::string source;                      // full candidate source text
  // Coordinator side only: set when the text is kept once in the coordinator's source table
  // (xxh64_hex of it, common/hash.h; coordinator/store/STORE.md, `ak:sources`) instead of in
  // every job; `source` is then empty. A JOB sent to a worker always carries the text and no
  // hash. JSON key "source_hash", written only when set.
  std::string source_hash;
  std::map<std::string, int64_t> config;   // tunables, passed as -D<NAME>=<value>
  std::vector<int64_t> shape;
  DType dtype = DType::kF32;
  Requirements requires_;                  // JSON key "requires"
  int64_t timeout_ms = 60'000;             // sandbox wall-clock limit for one attempt
  MeasureOptions measure;
  std::string tag;
  std::string description;
  // Index of the study (coordinator/study.h) of a study campaign that proposed this job; -1 for
  // the jobs of a plain campaign. JSON key "study", written only when >= 0.
  int study = -1;
  // Set for KernelBench jobs; JSON key "kernelbench", written only when set.
  std::optional<KernelBenchTask> kernelbench;
  // Set for model jobs; JSON key "model", written only when set.
  std::optional<ModelTask> model;
};

// A worker's performance ceilings: measured by its sandbox at start (calibration) and looked up in
// the datasheet table (worker/datasheet.h) by PCI device id, then name. Maps are keyed by dtype
// name: "fp16", "bf16", "tf32", "fp32" (fp32 without TF32). Zero or absent means unknown.
struct Ceilings {
  double copy_bandwidth_gbps = 0;             // device-to-device copy, bytes read + written [GB/s]
  std::map<std::string, double> gemm_tflops;  // cuBLAS GEMM through at::matmul [TFLOP/s]
  std::string datasheet_name;                 // "" when no entry matched
  std::string datasheet_match;                // how it matched, or why nothing did
  double datasheet_bandwidth_gbps = 0;
  std::map<std::string, double> datasheet_tflops;  // dense tensor-core (fp32: CUDA cores)
  // The device's last-level cache [bytes]: a GPU's L2 (CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE), a CPU's
  // largest data cache in sysfs. A call whose working set fits in it and that was timed hot is
  // held against no DRAM ceiling (Measurement::cache_resident). 0 = unknown.
  int64_t cache_bytes = 0;
};

// What a worker announces in READY.
struct Capabilities {
  std::string hostname;
  std::string gpu_name;        // "cpu" for a CPU worker
  std::string pci_id;          // "0000:19:00.0"; empty for CPU
  std::string pci_device_id;   // vendor:device, e.g. "10de:2335"; empty if unknown
  std::string compute_capability;  // "9.0"; empty for CPU
  std::string arch;            // "sm_90a", or "x86_64" for CPU
  int sm_count = 0;
  int64_t memory_bytes = 0;
  // The most shared memory one block may use [bytes]: CUDA's opt-in limit
  // (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN; H100/H200 227 KiB); for a CPU worker
  // the per-core L2 cache, where a CPU kernel's tile lives. 0 = unknown (a worker from before the
  // field). Studies prune cuda configurations with it (coordinator/study.h).
  int64_t shared_memory_per_block_bytes = 0;
  int device_index = -1;       // CUDA ordinal, -1 for CPU
  std::vector<Backend> backends;
  Ceilings ceilings;           // from the sandbox's calibration at start
  // Software the worker measures with, for the provenance of tuned results: "torch" (the
  // sandbox's libtorch), "cuda_driver" (cuDriverGetVersion, "13.0"), "nvidia_driver" (NVML,
  // "580.159.04"); a key is absent when unknown (CPU workers have only "torch").
  std::map<std::string, std::string> versions;
};

struct Measurement {
  double latency_us = 0;       // median of samples [us]
  double mean_us = 0;
  double p10_us = 0;
  double p90_us = 0;
  double cv = 0;               // stdev / mean of samples
  int samples = 0;
  double baseline_us = 0;      // PyTorch op, median, same sandbox, same run [us]
  double speedup = 0;          // baseline_us / latency_us
  double throughput_tflops = 0;
  double bandwidth_gbps = 0;   // bytes moved / latency [GB/s]
  double pct_peak = 0;         // bandwidth_gbps / measured copy bandwidth [%]
  double peak_bandwidth_gbps = 0;  // the measured ceiling used for pct_peak [GB/s]
  double max_abs_error = 0;
  double peak_vram_mb = 0;
  double compile_ms = 0;       // kept apart from kernel time
  bool cold_l2 = false;        // samples were taken with the L2 flushed before each
  double rel_se = 0;           // relative standard error of the candidate median at the stop
  // Roofline (worker/measure.h): the op's minimum work, the ceilings it was held against and
  // which one binds. pct_peak is against the measured ceiling of the binding resource,
  // pct_peak_datasheet against the datasheet's (0 without a datasheet entry).
  double flops = 0;
  double bytes = 0;
  double peak_tflops = 0;              // measured GEMM ceiling for the job's dtype [TFLOP/s]
  double datasheet_bandwidth_gbps = 0;
  double datasheet_tflops = 0;
  double pct_peak_datasheet = 0;
  std::string bound;                   // "memory", "compute" or "unknown"
  // The timed calls' working set (every rotated input set and the output) fit in the device's
  // last-level cache (Ceilings::cache_bytes) and the samples were taken hot, so the bytes came from
  // cache, not DRAM: a memory-bound call then has no pct_peak or pct_peak_datasheet (0), since the
  // only bandwidth ceilings measured are DRAM's (worker/measure.h, hold_to_ceilings).
  bool cache_resident = false;
  // Verification: every stage with its verdict, checks and worst error, e.g.
  // "smoke PASS 1 3e-08; sweep PASS 4 6e-08; hostile PASS 8 2e-08; determinism PASS 3; edge PASS 7 1e-08".
  std::string verification;
  // Timing protocol: input sets rotated over, the audit call's time, whether a blocking kernel
  // held the launches, and why sampling stopped (noise_target, max_samples, time_limit).
  int input_sets = 0;
  double audit_us = 0;
  bool blocking_kernel = false;
  std::string stop_reason;
  double baseline_p10_us = 0;
  double baseline_p90_us = 0;
  // Telemetry through NVML (worker/nvml.h), read right after sampling; clock_reasons are the
  // clock-event reasons seen before or after it; throttled when one of them slowed the GPU down.
  int sm_clock_mhz = 0;
  int mem_clock_mhz = 0;
  double power_w = 0;
  int temperature_c = 0;
  std::string clock_reasons;
  bool throttled = false;
};

struct ResultRecord {
  std::string job_id;
  int attempt = 0;
  ResultStatus status = ResultStatus::kFail;
  std::string stage;           // where a failure happened: compile, load, verify, measure, sandbox, lease
  std::string reason;
  Measurement m;
  std::string worker_id;
  std::string gpu;             // Capabilities::gpu_name of the worker
  std::string source_hash;     // xxh64 of source, hex
  std::string options_hash;    // xxh64 of compile options + compiler version + arch, hex
  int64_t completed_wall_ms = 0;
  std::vector<std::string> attempt_reasons;  // for LOST: why each attempt ended
  // KernelBench jobs: what the harness said (kernelbench/HARNESS.md): the faithful fields
  // ("verdict", "compiled", "correctness", "metadata", "runtime_ms", "runtime_stats",
  // "ref_runtime_ms"), the strict checks ("strict", "judge") or the baseline ("baseline").
  // JSON key "kernelbench", written only when not null.
  nlohmann::json kernelbench;
  // Model jobs: the profile models/profile_model.py wrote (models/README.md, "The profile").
  // JSON key "model", written only when not null.
  nlohmann::json model;
};

// The coordinator's record of a job; written through to the store on every transition.
struct JobRecord {
  JobSpec spec;
  JobState state = JobState::kQueued;
  int attempt = 0;                 // attempt number of the latest delivery; 0 = never delivered
  std::string worker_id;           // holder of the lease while kLeased
  int64_t lease_expires_ms = 0;    // monotonic, meaningful only while kLeased
  // Wall time [ms since the epoch] at which a restarted coordinator first found this lease without
  // its worker; 0 while the worker is registered. A restored lease gets what is left of one lease
  // from then, not a fresh lease on every restart (Scheduler::restore).
  int64_t orphaned_wall_ms = 0;
  std::vector<std::string> attempt_reasons;
  int64_t submitted_wall_ms = 0;
};

struct CampaignRecord {
  std::string campaign_id;
  std::string name;
  nlohmann::json definition;   // the submitted campaign document
  int64_t job_count = 0;
  int64_t submitted_wall_ms = 0;
  // Set by `autokernel cancel`: its unfinished jobs end CANCELLED and a study proposes no more.
  bool cancelled = false;
  std::string cancel_reason;
  // The client that submitted it: its CURVE public key (Z85) where the coordinator authenticates
  // clients, empty where it does not. Only the owner or an admin may cancel it (PROTOCOL.md).
  std::string owner;
};

void to_json(nlohmann::json& j, const KernelBenchTask& v);
void from_json(const nlohmann::json& j, KernelBenchTask& v);
void to_json(nlohmann::json& j, const ModelTask& v);
void from_json(const nlohmann::json& j, ModelTask& v);
void to_json(nlohmann::json& j, const Requirements& v);
void from_json(const nlohmann::json& j, Requirements& v);
void to_json(nlohmann::json& j, const MeasureOptions& v);
void from_json(const nlohmann::json& j, MeasureOptions& v);
void to_json(nlohmann::json& j, const JobSpec& v);
void from_json(const nlohmann::json& j, JobSpec& v);
void to_json(nlohmann::json& j, const Ceilings& v);
void from_json(const nlohmann::json& j, Ceilings& v);
void to_json(nlohmann::json& j, const Capabilities& v);
void from_json(const nlohmann::json& j, Capabilities& v);
void to_json(nlohmann::json& j, const Measurement& v);
void from_json(const nlohmann::json& j, Measurement& v);
void to_json(nlohmann::json& j, const ResultRecord& v);
void from_json(const nlohmann::json& j, ResultRecord& v);
void to_json(nlohmann::json& j, const JobRecord& v);
void from_json(const nlohmann::json& j, JobRecord& v);
void to_json(nlohmann::json& j, const CampaignRecord& v);
void from_json(const nlohmann::json& j, CampaignRecord& v);

// "1024x4096"
std::string shape_string(const std::vector<int64_t>& shape);
// "BLOCK=256,VEC=4" (sorted by name)
std::string config_string(const std::map<std::string, int64_t>& config);
// GPU model names ("NVIDIA H200", a campaign's gpu_models, a tuning entry's) compare ignoring case.
bool same_gpu_model(const std::string& a, const std::string& b);

}  // namespace ak
