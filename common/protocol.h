// The wire protocol between coordinator, workers and clients. Wire format: docs in
// common/PROTOCOL.md.
//
// Every ZeroMQ message carries exactly one body frame (after the ROUTER routing-id frame):
//   {"v": kProtocolVersion, "type": "<TYPE>", "body": {...}}
// One struct per message type below; encode() and decode() are the only code that maps types to
// strings. decode() never throws: garbage, unknown types, wrong versions, malformed bodies and
// frames over kMaxFrameBytes come back as a DecodeResult holding the Error to reply with.
// All functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/job.h"
#include "common/status.h"
#include "common/tuning.h"

namespace ak::protocol {

inline constexpr int kProtocolVersion = 1;
// Largest frame a peer may send us [bytes]. Job sources are a few KiB; 4 MiB leaves room for
// large candidate files while bounding what one bad peer can make us parse.
inline constexpr size_t kMaxFrameBytes = 4u << 20;

enum class ErrorCode {
  kUnknown = 0,
  kMalformed,  // not JSON, or JSON without the envelope fields
  kUnknownType,
  kBadVersion,
  kOversized,
  kBadBody,           // envelope fine, body does not match the message's schema
  kUnknownWorker,     // a worker message from a peer that has not sent READY (re-send READY)
  kIdentityMismatch,  // worker_id in the body differs from the connection's routing id
  kBadRequest,        // a client request the coordinator cannot satisfy (bad campaign ...)
  kStoreUnavailable,  // the coordinator could not write to Redis; retry later
  kForbidden,         // the peer may not do this: a result for a job not leased to it, a cancel of
                      // another client's campaign, an import without the admin role
  kInternal,
  kWorkerIdInUse,  // READY (or any worker message) under a worker id that a live worker of another
                   // instance holds; the sender is misconfigured and stops
};
// The highest code (for loops over every code).
inline constexpr ErrorCode kLastErrorCode = ErrorCode::kWorkerIdInUse;
const char* error_code_name(ErrorCode c);  // "MALFORMED", ...; used as a metric label

// ---- worker -> coordinator
// `instance` in every worker message: a token that names one worker installation, the same
// across its restarts (it is kept in the worker's state folder) and different between two
// workers given the same id by mistake. While a worker id is registered, the coordinator refuses
// messages of another instance under it (WORKER_ID_IN_USE); empty (an older worker): not checked.
// On the wire only when not empty (common/PROTOCOL.md, "Worker ids").
struct Ready {
  std::string worker_id;
  Capabilities caps;
  int slots = 1;  // how many jobs the worker wants leased at once (running + prefetching)
  std::string instance = {};
};
struct InFlight {
  std::string job_id;
  int attempt = 0;
};
struct Heartbeat {
  std::string worker_id;
  std::vector<InFlight> in_flight;  // jobs the worker holds; their leases are renewed
  std::string instance = {};
};
struct ResultMsg {
  std::string worker_id;
  ResultRecord result;
  std::string instance = {};
};
struct Disconnect {
  std::string worker_id;
  std::string reason;
  std::string instance = {};
};
// ---- coordinator -> worker
struct Job {
  JobSpec spec;
  int attempt = 1;
  int64_t lease_ms = 0;  // lease duration; renewed by every heartbeat that lists the job
};
struct Ack {
  std::string job_id;
  int attempt = 0;
};
// The job's campaign was cancelled: stop it if it is still running and send its result (a job
// stopped midway reports CANCELLED). A job already finished is only acknowledged as usual.
struct CancelJob {
  std::string job_id;
  int attempt = 0;
};
// ---- either direction
struct Error {
  ErrorCode code = ErrorCode::kUnknown;
  std::string message;
  // WORKER_ID_IN_USE: the instance whose message was refused. The ROUTER hands a routing id to
  // the newest connection, so the refusal may reach the worker that holds the id; that one sees
  // another instance here and ignores it. Empty otherwise (not on the wire).
  std::string instance = {};
};
// ---- client (CLI) <-> coordinator, on the client socket (REQ/REP)
struct Submit {
  nlohmann::json campaign;  // a campaign document (coordinator/campaign.h)
};
// A long poll when after_version >= 0: the reply waits until the coordinator's state version
// (the "version" field of every STATUS reply) exceeds after_version, or wait_ms has passed.
struct StatusQuery {
  int64_t after_version = -1;
  int64_t wait_ms = 0;
};
struct ResultsQuery {
  std::string campaign_id;  // empty: all
  std::string status;       // empty: all; else a ResultStatus name
  std::string kernel_type;  // empty: all; the target's kernel type
  std::string shape;        // empty: all; the target's shape, "4096x4096"
  std::string gpu_model;    // empty: all; the worker's GPU name, case-insensitive
};
// The tuning database (common/tuning.h): the entries a query matches, as an export document.
struct BestQuery {
  TuningQuery query;
};
// Cancels a campaign: its queued jobs end CANCELLED, its running ones are stopped on their workers,
// a study campaign proposes nothing more. Cancelling a finished or cancelled campaign changes
// nothing.
struct Cancel {
  std::string campaign_id;
  std::string reason;
};
// Merges entries into the tuning database: per key, the faster entry stays.
struct ImportBest {
  nlohmann::json document;  // an export document (tuning_export)
};
// The answer to a client request. On the wire its body is the request's reply struct below
// (SubmitReply for SUBMIT, ...), written by to_json; the client reads it back with
// parse_reply<T>(). Reply itself stays untyped so one envelope type serves every request.
struct Reply {
  nlohmann::json body;  // request-specific; see PROTOCOL.md, "Replies"
};

using Message = std::variant<Ready, Heartbeat, ResultMsg, Disconnect, Job, Ack, CancelJob, Error, Submit,
                             StatusQuery, ResultsQuery, BestQuery, Cancel, ImportBest, Reply>;

struct DecodeResult {
  std::optional<Message> message;
  Error error;  // meaningful when !message
  bool ok() const { return message.has_value(); }
};

std::string encode(const Message& m);
DecodeResult decode(std::string_view frame);
// The same with another size limit, for replies a client asked for (result listings).
DecodeResult decode(std::string_view frame, size_t max_frame_bytes);
// The wire name of a message ("READY", ...).
const char* type_name(const Message& m);

// ---- replies to client requests (the body of a REPLY), and the records they carry.
// to_json and from_json of each are in common/protocol.cc, the one place that names their keys.
// from_json throws nlohmann::json::exception on a missing or mistyped required field; callers go
// through parse_reply(), which turns that into a Status naming the struct and the field.

// SUBMIT
struct SubmitReply {
  std::string campaign_id;
  int64_t jobs = 0;  // jobs submitted now (a study campaign: its first proposals)
  std::string name;
  std::optional<int64_t> studies;  // study campaigns only: how many studies
};

// CANCEL (Scheduler::CancelCounts)
struct CancelReply {
  std::string campaign_id;
  int64_t cancelled = 0;  // queued jobs ended CANCELLED now
  int64_t stopping = 0;   // running jobs whose workers were told to stop
  int64_t finished = 0;   // jobs that had ended before
};

// BEST: the tuning database's matching entries as an export document (common/tuning.h), the same
// document `autokernel best --export` writes.
struct BestReply {
  int format = 1;
  int64_t exported_wall_ms = 0;
  std::string exported;             // exported_wall_ms as "2026-12-04T02:10:00Z"
  std::vector<TunedEntry> entries;  // sorted by tuning_key
};

// IMPORT_BEST
struct ImportBestReply {
  int64_t entries = 0;  // entries in the document
  int64_t stored = 0;   // entries that went in (no entry for the key, or a faster one)
  int64_t kept = 0;     // entries ignored because the farm's entry is as fast or faster
};

// STATUS
struct JobCounts {
  int64_t queued = 0, leased = 0, done = 0, lost = 0;
};
struct WorkerRow {
  std::string worker_id;
  std::string gpu;  // Capabilities::gpu_name
  std::string arch;
  std::string pci_id;
  std::vector<std::string> backends;  // backend names
  int slots = 0;
  std::vector<std::string> leased;  // job ids leased to it now
  int64_t last_seen_ms_ago = 0;
  Ceilings ceilings;
};
// The fastest speedup over PyTorch among a campaign's passing results.
struct CampaignBest {
  std::string job_id;
  double latency_us = 0;
  double speedup = 0;
  std::string shape;   // "4096x4096"
  std::string dtype;   // dtype name
  std::string config;  // config_string
};
// A study's best trial so far.
struct StudyBest {
  double latency_us = 0;
  std::string job_id;
  std::string config;  // config_string
  double speedup = 0;  // the best trial's own result row's speedup_vs_pytorch (its latency against
                       // the PyTorch time measured in that job); 0 when unknown
};
// One study of a study campaign (coordinator/study.h, StudyStatus).
struct StudyRow {
  int study = 0;
  std::string target;
  std::string gpu_model;
  double share = 0;    // the target's share of model time
  int64_t trials = 0;  // finished, failed ones included
  int64_t in_flight = 0;
  int64_t passed = 0;
  double baseline_us = 0;
  double roofline_us = 0;  // 0: unknown
  std::optional<StudyBest> best;
  int64_t since_improvement = 0;
  std::string stop;  // why it stopped ("" while running, "EXHAUSTED", a StopReason name)
  bool done = false;
  double eta_s = -1;  // -1: unknown
};
struct CampaignRow {
  std::string campaign_id;
  std::string name;
  int64_t total = 0;
  int64_t finished = 0;  // DONE or LOST
  int64_t pass = 0;
  int64_t failed = 0;  // finished without passing, cancelled jobs not counted
  std::optional<CampaignBest> best;
  int64_t submitted_wall_ms = 0;
  bool complete = false;
  // Study campaigns only (JSON "kind": "study", "amdahl", "studies").
  bool is_study = false;
  std::map<std::string, double> amdahl;  // GPU model -> end-to-end estimate
  std::vector<StudyRow> studies;
  // Cancelled campaigns only (JSON "cancelled": true, "cancelled_jobs", "cancel_reason").
  bool cancelled = false;
  int64_t cancelled_jobs = 0;
  std::string cancel_reason;
  // Its queued jobs that no connected worker can run (Scheduler::stranded().by_campaign; JSON
  // "unrunnable", absent when 0): the farm-wide StatusReply::unrunnable, for this campaign alone.
  int64_t unrunnable = 0;
};
struct StatusReply {
  JobCounts jobs;
  std::map<std::string, int64_t> results;  // stored results by status name
  std::vector<WorkerRow> workers;
  std::vector<CampaignRow> campaigns;
  double uptime_s = 0;
  // Bumped on every event that changes what STATUS shows; a STATUS long poll waits on it.
  int64_t version = 0;
  double results_per_hour = 0;
  // Queued jobs that no connected worker can run, by what they need that none offers
  // (Scheduler::stranded().by_need: "backend cuda", "gpu_model NVIDIA H100", "arch sm_90a"); absent in
  // JSON when empty. A client warns about them: they would wait forever.
  std::map<std::string, int64_t> unrunnable;
};

// RESULTS: one row per stored result (common/result_fields.h names and orders the columns).
//
// The KernelBench part of a row: the job's task and what the harness said (kernelbench/HARNESS.md),
// decoded here and nowhere else. A typed field is nullopt when the harness did not write it or
// wrote null (a non-finite float); such a null, and every key this struct does not name, is kept in
// `other`, so a row written back out (autokernel results --json, export) is what the coordinator
// sent.
struct KernelBenchTaskRow {
  std::string mode;  // "candidate" | "baseline"
  int level = 0;
  int problem_id = 0;
  std::string problem_name;
  int sample_id = 0;
  std::string backend;
  std::string precision;
  bool compile = false;
  std::string compile_mode;
};
// A baseline step's result: KernelBench's measure_ref_program_time and where the time went.
struct KernelBenchBaseline {
  std::optional<bool> ok;
  std::optional<std::string> error;
  std::optional<double> mean_ms;
  std::optional<nlohmann::json> stats;  // {mean, std, min, max, num_trials, hardware, device}
  std::optional<std::string> hardware;
  std::optional<std::string> device;
  std::optional<std::map<std::string, double>> phases_s;  // phase name -> seconds
  nlohmann::json other = nlohmann::json::object();
};
struct KernelBenchVerdict {
  std::optional<std::string> mode;     // "candidate" | "baseline"
  std::optional<std::string> step;     // a step that ended without a verdict
  std::optional<std::string> verdict;  // "correct" | "incorrect" | "compile_failure" | "runtime_error"
  std::optional<bool> compiled;
  std::optional<bool> correctness;
  std::optional<double> runtime_ms;      // -1: not timed
  std::optional<double> ref_runtime_ms;  // -1: not reached
  // KernelBench's own objects, passed through to eval_results.json as they are (a null included);
  // nullopt when absent.
  std::optional<nlohmann::json> metadata;
  std::optional<nlohmann::json> runtime_stats;
  std::optional<nlohmann::json> strict;  // the strict checks; null when not run
  std::optional<nlohmann::json> judge;   // the judge's verdict
  // The witness's verdict (kernelbench/witness.h), added by the worker: its signed body plus
  // "verdict" ("pass", "fail", "not_witnessed") and "reason".
  std::optional<nlohmann::json> witness;
  std::optional<KernelBenchBaseline> baseline;
  std::optional<KernelBenchTaskRow> task;  // added by the coordinator (result_row)
  nlohmann::json other = nlohmann::json::object();
};
// Decodes a ResultRecord's `kernelbench` document (the worker's, from the harness). Never throws:
// a field of the wrong type is an kInvalidArgument naming it.
Result<KernelBenchVerdict> parse_kernelbench_verdict(const nlohmann::json& doc);

// The model part of a row: a model job's profile (models/README.md, "The profile"), decoded here
// and nowhere else. `raw` is the document as the worker sent it, written back out unchanged
// (autokernel results --json, profile --json); the typed fields are what the CLI reads.
struct ModelOpRow {
  std::string op;           // the ATen op or "ak::<type>" region the time is credited to
  std::string kernel_type;  // a kernel type, or "other"
  std::vector<int64_t> shape;
  nlohmann::json layout = nlohmann::json::object();
  std::string dtype;
  double calls_per_iter = 0;
  double us_per_iter = 0;  // device time per model iteration [us]
  double share = 0;        // of the total device time
  std::string bound;       // "memory", "compute" or "-"
};
struct ModelTargetRow {
  std::string kernel_type;
  std::vector<int64_t> shape;
  std::string dtype;
  nlohmann::json layout = nlohmann::json::object();
  std::vector<std::string> ops;
  double us_per_iter = 0;
  double share = 0;
  std::string bound;
};
struct ModelUncoveredRow {
  std::string op;
  double us_per_iter = 0;
  double share = 0;
};
struct ModelProfile {
  std::string model;
  std::string device;
  std::string dtype;
  std::string mode;  // "eager" | "compile"
  std::optional<std::string> gpu;
  std::optional<std::string> error;  // a model that could not be profiled
  std::optional<double> total_us_per_iter;
  std::optional<double> unattributed_us_per_iter;
  std::vector<ModelOpRow> ops;
  std::vector<ModelTargetRow> targets;
  std::vector<ModelUncoveredRow> uncovered;
  nlohmann::json raw;
};
// Decodes a ResultRecord's `model` document. Never throws: a field of the wrong type is an
// kInvalidArgument naming it.
Result<ModelProfile> parse_model_profile(const nlohmann::json& doc);

// A model verify job's report (models/verify_model.py, with the worker's kernels_skipped; it rides
// in a row's `model` document), decoded here and nowhere else, for `autokernel verify` and `run
// --model` to print. Parts a failed step did not reach are empty. Never throws: a field of the
// wrong type is an kInvalidArgument naming it.
struct ModelTiming {
  double median_us = 0;
  double p10_us = 0;
  double p90_us = 0;
};
struct ModelForcedDecode {  // the tuned model fed the original's tokens (compare_decoding)
  int agree = 0;
  int ties = 0;
  int near_ties = 0;  // choices within the outputs' tolerance of the original's best logit
  std::optional<double> largest_gap;
  std::optional<double> tolerance;
  std::optional<int> first_difference;
  bool identical_but_ties = false;
};
struct ModelDecode {
  int tokens = 0;
  bool identical = false;
  std::optional<int> first_difference;
  std::optional<double> margin_at_difference;
  std::optional<ModelForcedDecode> forced;
};
struct ModelOutputs {
  bool pass = false;
  double tuned_error = 0;
  double original_error = 0;
  double limit = 0;
};
struct ModelReplacedCall {
  std::string function;
  std::string kernel_type;
  std::vector<int64_t> shape;
  int calls_per_forward = 0;
};
struct ModelFallbackCall {
  std::string function;
  std::string reason;
  int calls_per_forward = 0;
};
struct ModelSkippedKernel {
  std::string kernel_type;
  std::vector<int64_t> shape;
  std::string reason;
};
struct ModelVerifyReport {
  std::string model;
  std::string device;
  std::string dtype;
  std::optional<std::string> gpu;
  std::optional<ModelOutputs> outputs;  // absent: the report of a step that failed before comparing
  std::optional<ModelDecode> decode;
  std::map<std::string, ModelTiming> time;              // "eager", "compile", "tuned": one forward, wall time
  std::optional<ModelTiming> graph_eager, graph_tuned;  // device time (each forward in a CUDA graph)
  std::optional<double> graph_speedup;
  std::optional<double> predicted_speedup;
  std::optional<double> speedup_vs_eager;
  std::optional<double> speedup_vs_compile;
  std::vector<ModelReplacedCall> replaced;
  std::vector<ModelFallbackCall> fallbacks;
  std::vector<ModelSkippedKernel> kernels_skipped;
  nlohmann::json raw;
};
Result<ModelVerifyReport> parse_model_verify(const nlohmann::json& doc);

// Figures of a job that did not pass are nullopt (null in JSON; empty in TSV).
struct ResultRow {
  int64_t experiment = 0;
  std::string tag;
  std::string kernel_type;
  std::optional<double> throughput_tflops;
  std::optional<double> latency_us;
  std::optional<double> pct_peak;
  std::optional<double> speedup_vs_pytorch;
  std::string correctness;  // result status name
  std::optional<double> peak_vram_mb;
  std::string description;
  std::string job_id;
  int attempt = 0;
  std::string gpu;
  std::string worker;
  std::string shape;
  std::string dtype;
  std::string config;
  std::string source_hash;
  std::string backend;
  std::optional<double> baseline_us;
  std::optional<double> bandwidth_gbps;
  std::optional<double> samples;
  std::optional<double> cv;
  double compile_ms = 0;
  std::optional<bool> cold_l2;
  std::optional<double> rel_se;
  double max_abs_error = 0;
  std::string verification;
  std::optional<double> flops;
  std::optional<double> bytes;
  std::optional<std::string> bound;
  // Absent in rows from before the field; null for a job that did not pass (common/job.h).
  std::optional<bool> cache_resident;
  std::optional<double> pct_peak_datasheet;
  std::optional<double> peak_tflops;
  std::optional<double> input_sets;
  std::optional<double> audit_us;
  std::optional<std::string> stop_reason;
  std::optional<double> sm_clock_mhz;
  std::optional<double> power_w;
  std::optional<double> temperature_c;
  std::optional<std::string> clock_reasons;
  std::optional<bool> throttled;
  std::string stage;
  std::string reason;
  std::string campaign_id;
  int64_t completed_wall_ms = 0;
  std::optional<KernelBenchVerdict> kernelbench;  // KernelBench jobs only
  std::optional<ModelProfile> model;              // model jobs only
};
struct ResultsReply {
  std::vector<ResultRow> rows;  // in the order results were stored
};

// The line `autokernel coordinator` prints on stdout once it serves: "READY " and this as JSON.
// Whoever started it (autokernel run, the integration tests) reads its endpoints from it.
struct CoordinatorReadyLine {
  std::string workers;   // the worker endpoint bound
  std::string clients;   // the client endpoint bound
  int metrics_port = 0;  // 0: /metrics not served
  std::string redis;     // the store's URL
  int64_t pid = 0;
};

// A macro list, one name per entry.
// clang-format off
#define AK_PROTOCOL_REPLY_TYPES(X)                                                                                  \
  X(SubmitReply)                                                                                                    \
  X(CancelReply) X(BestReply) X(ImportBestReply) X(JobCounts) X(WorkerRow) X(CampaignBest) X(StudyBest) X(StudyRow) \
      X(CampaignRow) X(StatusReply) X(KernelBenchTaskRow) X(KernelBenchBaseline) X(KernelBenchVerdict) X(ModelOpRow) \
      X(ModelTargetRow) X(ModelUncoveredRow) X(ModelProfile) X(ResultRow) \
          X(ResultsReply) X(CoordinatorReadyLine)
// clang-format on
#define AK_PROTOCOL_DECLARE_JSON(T)            \
  void to_json(nlohmann::json& j, const T& v); \
  void from_json(const nlohmann::json& j, T& v);
AK_PROTOCOL_REPLY_TYPES(AK_PROTOCOL_DECLARE_JSON)
#undef AK_PROTOCOL_DECLARE_JSON

// Decodes a reply body (or the READY line) as T. Never throws: a missing or mistyped field comes
// back as kInternal, "coordinator reply does not match StatusReply: <which field, what arrived>".
// Defined for every type of AK_PROTOCOL_REPLY_TYPES.
template <typename T>
Result<T> parse_reply(const nlohmann::json& body);

}  // namespace ak::protocol
