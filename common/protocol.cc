#include "common/protocol.h"

#include "common/json_limits.h"

#include <cstdint>
#include <stdexcept>
#include <type_traits>

namespace ak::protocol {

using nlohmann::json;

const char* error_code_name(ErrorCode c) {
  switch (c) {
    case ErrorCode::kUnknown: return "UNKNOWN";
    case ErrorCode::kMalformed: return "MALFORMED";
    case ErrorCode::kUnknownType: return "UNKNOWN_TYPE";
    case ErrorCode::kBadVersion: return "BAD_VERSION";
    case ErrorCode::kOversized: return "OVERSIZED";
    case ErrorCode::kBadBody: return "BAD_BODY";
    case ErrorCode::kUnknownWorker: return "UNKNOWN_WORKER";
    case ErrorCode::kIdentityMismatch: return "IDENTITY_MISMATCH";
    case ErrorCode::kBadRequest: return "BAD_REQUEST";
    case ErrorCode::kStoreUnavailable: return "STORE_UNAVAILABLE";
    case ErrorCode::kForbidden:
      return "FORBIDDEN";
    case ErrorCode::kInternal: return "INTERNAL";
    case ErrorCode::kWorkerIdInUse:
      return "WORKER_ID_IN_USE";
  }
  return "UNKNOWN";
}

namespace {

// The optional "instance" field of worker messages and ERROR: on the wire only when set, so that
// a worker without one sends what it always sent.
json with_instance(json body, const std::string& instance) {
  if (!instance.empty()) body["instance"] = instance;
  return body;
}

struct Encoder {
  json operator()(const Ready& m) const {
    return with_instance({{"worker_id", m.worker_id}, {"caps", m.caps}, {"slots", m.slots}}, m.instance);
  }
  json operator()(const Heartbeat& m) const {
    json inflight = json::array();
    for (const auto& f : m.in_flight) inflight.push_back({{"job_id", f.job_id}, {"attempt", f.attempt}});
    return with_instance({{"worker_id", m.worker_id}, {"in_flight", inflight}}, m.instance);
  }
  json operator()(const ResultMsg& m) const {
    return with_instance({{"worker_id", m.worker_id}, {"result", m.result}}, m.instance);
  }
  json operator()(const Disconnect& m) const {
    return with_instance({{"worker_id", m.worker_id}, {"reason", m.reason}}, m.instance);
  }
  json operator()(const Job& m) const { return {{"spec", m.spec}, {"attempt", m.attempt}, {"lease_ms", m.lease_ms}}; }
  json operator()(const Ack& m) const { return {{"job_id", m.job_id}, {"attempt", m.attempt}}; }
  json operator()(const CancelJob& m) const { return {{"job_id", m.job_id}, {"attempt", m.attempt}}; }
  json operator()(const Cancel& m) const { return {{"campaign_id", m.campaign_id}, {"reason", m.reason}}; }
  json operator()(const Error& m) const {
    return with_instance({{"code", error_code_name(m.code)}, {"message", m.message}}, m.instance);
  }
  json operator()(const Submit& m) const { return {{"campaign", m.campaign}}; }
  json operator()(const StatusQuery& m) const {
    if (m.after_version < 0) return json::object();
    return {{"after_version", m.after_version}, {"wait_ms", m.wait_ms}};
  }
  json operator()(const ResultsQuery& m) const {
    return {{"campaign_id", m.campaign_id}, {"status", m.status}, {"kernel_type", m.kernel_type},
            {"shape", m.shape}, {"gpu_model", m.gpu_model}};
  }
  json operator()(const BestQuery& m) const {
    return {{"kernel_type", m.query.kernel_type}, {"backend", m.query.backend}, {"gpu_model", m.query.gpu_model},
            {"dtype", m.query.dtype}, {"shape", m.query.shape}};
  }
  json operator()(const ImportBest& m) const { return {{"document", m.document}}; }
  json operator()(const Reply& m) const { return m.body; }
};

struct Namer {
  const char* operator()(const Ready&) const { return "READY"; }
  const char* operator()(const Heartbeat&) const { return "HEARTBEAT"; }
  const char* operator()(const ResultMsg&) const { return "RESULT"; }
  const char* operator()(const Disconnect&) const { return "DISCONNECT"; }
  const char* operator()(const Job&) const { return "JOB"; }
  const char* operator()(const Ack&) const { return "ACK"; }
  const char* operator()(const CancelJob&) const { return "CANCEL_JOB"; }
  const char* operator()(const Cancel&) const { return "CANCEL"; }
  const char* operator()(const Error&) const { return "ERROR"; }
  const char* operator()(const Submit&) const { return "SUBMIT"; }
  const char* operator()(const StatusQuery&) const { return "STATUS"; }
  const char* operator()(const ResultsQuery&) const { return "RESULTS"; }
  const char* operator()(const BestQuery&) const { return "BEST"; }
  const char* operator()(const ImportBest&) const { return "IMPORT_BEST"; }
  const char* operator()(const Reply&) const { return "REPLY"; }
};

ErrorCode parse_error_code(const std::string& s) {
  for (int i = 0; i <= static_cast<int>(kLastErrorCode); ++i)
    if (s == error_code_name(static_cast<ErrorCode>(i))) return static_cast<ErrorCode>(i);
  return ErrorCode::kUnknown;
}

DecodeResult fail(ErrorCode c, std::string msg) {
  DecodeResult r;
  r.error = {c, std::move(msg)};
  return r;
}

Message decode_body(const std::string& type, const json& b, bool* known) {
  *known = true;
  if (type == "READY")
    return Ready{b.at("worker_id").get<std::string>(), b.at("caps").get<Capabilities>(), b.value("slots", 1),
                 b.value("instance", "")};
  if (type == "HEARTBEAT") {
    Heartbeat h{b.at("worker_id").get<std::string>(), {}, b.value("instance", "")};
    for (const auto& f : b.at("in_flight")) h.in_flight.push_back({f.at("job_id").get<std::string>(), f.at("attempt").get<int>()});
    return h;
  }
  if (type == "RESULT")
    return ResultMsg{b.at("worker_id").get<std::string>(), b.at("result").get<ResultRecord>(), b.value("instance", "")};
  if (type == "DISCONNECT")
    return Disconnect{b.at("worker_id").get<std::string>(), b.value("reason", ""), b.value("instance", "")};
  if (type == "JOB") return Job{b.at("spec").get<JobSpec>(), b.at("attempt").get<int>(), b.at("lease_ms").get<int64_t>()};
  if (type == "ACK") return Ack{b.at("job_id").get<std::string>(), b.at("attempt").get<int>()};
  if (type == "CANCEL_JOB") return CancelJob{b.at("job_id").get<std::string>(), b.at("attempt").get<int>()};
  if (type == "CANCEL") return Cancel{b.at("campaign_id").get<std::string>(), b.value("reason", "")};
  if (type == "ERROR")
    return Error{parse_error_code(b.at("code").get<std::string>()), b.value("message", ""), b.value("instance", "")};
  if (type == "SUBMIT") return Submit{b.at("campaign")};
  if (type == "STATUS") return StatusQuery{b.value("after_version", int64_t{-1}), b.value("wait_ms", int64_t{0})};
  if (type == "RESULTS")
    return ResultsQuery{b.value("campaign_id", ""), b.value("status", ""), b.value("kernel_type", ""),
                        b.value("shape", ""), b.value("gpu_model", "")};
  if (type == "BEST")
    return BestQuery{{b.value("kernel_type", ""), b.value("backend", ""), b.value("gpu_model", ""),
                      b.value("dtype", ""), b.value("shape", "")}};
  if (type == "IMPORT_BEST") return ImportBest{b.at("document")};
  if (type == "REPLY") return Reply{b};
  *known = false;
  return Error{};
}

}  // namespace

const char* type_name(const Message& m) { return std::visit(Namer{}, m); }

std::string encode(const Message& m) {
  json env = {{"v", kProtocolVersion}, {"type", type_name(m)}, {"body", std::visit(Encoder{}, m)}};
  return env.dump(-1, ' ', false, json::error_handler_t::replace);
}

DecodeResult decode(std::string_view frame) { return decode(frame, kMaxFrameBytes); }

DecodeResult decode(std::string_view frame, size_t max_frame_bytes) {
  if (frame.size() > max_frame_bytes)
    return fail(ErrorCode::kOversized, "frame of " + std::to_string(frame.size()) + " bytes exceeds the limit of " +
                                           std::to_string(max_frame_bytes) + " bytes; send smaller sources");
  // Before parsing: a deeply nested document costs far more to parse and free than its size says.
  // The value cap applies to what peers send; a reply a client asked for (a larger max_frame_bytes,
  // a result listing) may hold more.
  if (Status s = check_json_limits(frame, kMaxJsonDepth, max_frame_bytes > kMaxFrameBytes ? SIZE_MAX : kMaxJsonValues);
      !s.ok())
    return fail(ErrorCode::kOversized, "frame refused: " + s.message() + "; messages nest at most a few levels");
  json env = json::parse(frame.begin(), frame.end(), nullptr, /*allow_exceptions=*/false);
  if (env.is_discarded()) return fail(ErrorCode::kMalformed, "frame is not valid JSON; expected {\"v\":1,\"type\":...,\"body\":{...}}");
  if (!env.is_object() || !env.contains("v") || !env.contains("type") || !env.contains("body") ||
      !env["v"].is_number_integer() || !env["type"].is_string() || !env["body"].is_object())
    return fail(ErrorCode::kMalformed, "frame lacks the envelope; expected {\"v\":int,\"type\":string,\"body\":object}");
  const int v = env["v"].get<int>();
  if (v != kProtocolVersion)
    return fail(ErrorCode::kBadVersion, "peer sent protocol version " + std::to_string(v) + "; this side speaks " +
                                            std::to_string(kProtocolVersion) + "; upgrade the older side");
  const std::string type = env["type"].get<std::string>();
  try {
    bool known = false;
    Message m = decode_body(type, env["body"], &known);
    if (!known) return fail(ErrorCode::kUnknownType, "unknown message type '" + type.substr(0, 64) + "'");
    DecodeResult r;
    r.message = std::move(m);
    return r;
  } catch (const std::exception& e) {
    return fail(ErrorCode::kBadBody, "body of " + type + " does not match its schema: " + e.what());
  }
}

// ---- replies
//
// Every key of a reply is named in this section and nowhere else (PROTOCOL.md, "Replies").
// Reading goes through Fields, which names the key at fault when one is missing or of another type.

namespace {

// A missing or mistyped field, with the path to it ("campaigns: best: speedup: ...").
class FieldError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

const char* json_type(const json& v) { return v.type_name(); }

template <typename T>
T read_as(const json& v, const char* key) {
  try {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if (!v.is_number_integer())
        throw FieldError(std::string(key) + ": expected an integer, got " + json_type(v) + " " +
                         v.dump().substr(0, 40));
    }
    return v.get<T>();
  } catch (const FieldError& e) {
    if (std::string_view(e.what()).rfind(key, 0) == 0) throw;  // already names this key
    throw FieldError(std::string(key) + ": " + e.what());
  } catch (const std::exception& e) {
    throw FieldError(std::string(key) + ": " + e.what());
  }
}

class Fields {
 public:
  Fields(const json& j, const char* what) : j_(j) {
    if (!j.is_object()) throw FieldError(std::string(what) + " must be an object, got " + json_type(j));
  }
  bool has(const char* k) const { return j_.contains(k); }
  // A field that must be there.
  template <typename T>
  void req(const char* k, T& out) const {
    if (!j_.contains(k)) throw FieldError(std::string(k) + ": missing");
    out = read_as<T>(j_.at(k), k);
  }
  // A field that must be there and may be null (a figure of a job that did not pass, ...).
  template <typename T>
  void nullable(const char* k, std::optional<T>& out) const {
    if (!j_.contains(k)) throw FieldError(std::string(k) + ": missing");
    const json& v = j_.at(k);
    if (v.is_null())
      out.reset();
    else
      out = read_as<T>(v, k);
  }
  // A field that may be absent; null counts as absent (the caller keeps it with the others).
  template <typename T>
  void maybe(const char* k, std::optional<T>& out) const {
    out.reset();
    if (!j_.contains(k) || j_.at(k).is_null()) return;
    out = read_as<T>(j_.at(k), k);
  }
  // A field that may be absent; the default stays.
  template <typename T>
  void with_default(const char* k, T& out) const {
    if (j_.contains(k)) out = read_as<T>(j_.at(k), k);
  }

 private:
  const json& j_;
};

template <typename T>
json nullable_json(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

// Keys of `j` that are neither in `typed` nor in `passed`, with their values, and the nulls of
// `typed` keys (a typed field holds no null, so it is written back from here as it came).
json others(const json& j, std::initializer_list<const char*> typed, std::initializer_list<const char*> passed) {
  json out = json::object();
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool named = false;
    for (const char* n : typed)
      if (it.key() == n) named = !it.value().is_null();
    for (const char* n : passed)
      if (it.key() == n) named = true;
    if (!named) out[it.key()] = it.value();
  }
  return out;
}

template <typename T>
void put_if(json& j, const char* k, const std::optional<T>& v) {
  if (v) j[k] = *v;
}

}  // namespace

void to_json(json& j, const SubmitReply& v) {
  j = {{"campaign_id", v.campaign_id}, {"jobs", v.jobs}, {"name", v.name}};
  put_if(j, "studies", v.studies);
}
void from_json(const json& j, SubmitReply& v) {
  Fields f(j, "SUBMIT reply");
  f.req("campaign_id", v.campaign_id);
  f.req("jobs", v.jobs);
  f.req("name", v.name);
  f.maybe("studies", v.studies);
}

void to_json(json& j, const CancelReply& v) {
  j = {{"campaign_id", v.campaign_id}, {"cancelled", v.cancelled}, {"stopping", v.stopping}, {"finished", v.finished}};
}
void from_json(const json& j, CancelReply& v) {
  Fields f(j, "CANCEL reply");
  f.req("campaign_id", v.campaign_id);
  f.req("cancelled", v.cancelled);
  f.req("stopping", v.stopping);
  f.req("finished", v.finished);
}

void to_json(json& j, const BestReply& v) {
  j = {
      {"format", v.format}, {"exported_wall_ms", v.exported_wall_ms}, {"exported", v.exported}, {"entries", v.entries}};
}
void from_json(const json& j, BestReply& v) {
  Fields f(j, "BEST reply");
  f.req("format", v.format);
  f.req("exported_wall_ms", v.exported_wall_ms);
  f.req("exported", v.exported);
  f.req("entries", v.entries);
}

void to_json(json& j, const ImportBestReply& v) {
  j = {{"entries", v.entries}, {"stored", v.stored}, {"kept", v.kept}};
}
void from_json(const json& j, ImportBestReply& v) {
  Fields f(j, "IMPORT_BEST reply");
  f.req("entries", v.entries);
  f.req("stored", v.stored);
  f.req("kept", v.kept);
}

void to_json(json& j, const JobCounts& v) {
  j = {{"queued", v.queued}, {"leased", v.leased}, {"done", v.done}, {"lost", v.lost}};
}
void from_json(const json& j, JobCounts& v) {
  Fields f(j, "jobs");
  f.req("queued", v.queued);
  f.req("leased", v.leased);
  f.req("done", v.done);
  f.req("lost", v.lost);
}

void to_json(json& j, const WorkerRow& v) {
  j = {{"worker_id", v.worker_id}, {"gpu", v.gpu},     {"arch", v.arch},     {"pci_id", v.pci_id},
       {"backends", v.backends},   {"slots", v.slots}, {"leased", v.leased}, {"last_seen_ms_ago", v.last_seen_ms_ago},
       {"ceilings", v.ceilings}};
}
void from_json(const json& j, WorkerRow& v) {
  Fields f(j, "worker");
  f.req("worker_id", v.worker_id);
  f.req("gpu", v.gpu);
  f.req("arch", v.arch);
  f.req("pci_id", v.pci_id);
  f.req("backends", v.backends);
  f.req("slots", v.slots);
  f.req("leased", v.leased);
  f.req("last_seen_ms_ago", v.last_seen_ms_ago);
  f.req("ceilings", v.ceilings);
}

void to_json(json& j, const CampaignBest& v) {
  j = {{"job_id", v.job_id}, {"latency_us", v.latency_us}, {"speedup", v.speedup},
       {"shape", v.shape},   {"dtype", v.dtype},           {"config", v.config}};
}
void from_json(const json& j, CampaignBest& v) {
  Fields f(j, "best");
  f.req("job_id", v.job_id);
  f.req("latency_us", v.latency_us);
  f.req("speedup", v.speedup);
  f.req("shape", v.shape);
  f.req("dtype", v.dtype);
  f.req("config", v.config);
}

void to_json(json& j, const StudyBest& v) {
  j = {{"latency_us", v.latency_us}, {"job_id", v.job_id}, {"config", v.config}, {"speedup", v.speedup}};
}
void from_json(const json& j, StudyBest& v) {
  Fields f(j, "best");
  f.req("latency_us", v.latency_us);
  f.req("job_id", v.job_id);
  f.req("config", v.config);
  f.req("speedup", v.speedup);
}

void to_json(json& j, const StudyRow& v) {
  j = {{"study", v.study},
       {"target", v.target},
       {"gpu_model", v.gpu_model},
       {"share", v.share},
       {"trials", v.trials},
       {"in_flight", v.in_flight},
       {"passed", v.passed},
       {"baseline_us", v.baseline_us},
       {"roofline_us", v.roofline_us},
       {"best", nullable_json(v.best)},
       {"since_improvement", v.since_improvement},
       {"stop", v.stop},
       {"done", v.done},
       {"eta_s", v.eta_s}};
}
void from_json(const json& j, StudyRow& v) {
  Fields f(j, "study");
  f.req("study", v.study);
  f.req("target", v.target);
  f.req("gpu_model", v.gpu_model);
  f.req("share", v.share);
  f.req("trials", v.trials);
  f.req("in_flight", v.in_flight);
  f.req("passed", v.passed);
  f.req("baseline_us", v.baseline_us);
  f.req("roofline_us", v.roofline_us);
  f.nullable("best", v.best);
  f.req("since_improvement", v.since_improvement);
  f.req("stop", v.stop);
  f.req("done", v.done);
  f.req("eta_s", v.eta_s);
}

void to_json(json& j, const CampaignRow& v) {
  j = {{"campaign_id", v.campaign_id},
       {"name", v.name},
       {"total", v.total},
       {"finished", v.finished},
       {"pass", v.pass},
       {"failed", v.failed},
       {"best", nullable_json(v.best)},
       {"submitted_wall_ms", v.submitted_wall_ms},
       {"complete", v.complete}};
  if (v.is_study) {
    j["kind"] = "study";
    j["amdahl"] = v.amdahl;
    j["studies"] = v.studies;
  }
  if (v.cancelled) {
    j["cancelled"] = true;
    j["cancelled_jobs"] = v.cancelled_jobs;
    j["cancel_reason"] = v.cancel_reason;
  }
  if (v.unrunnable > 0) j["unrunnable"] = v.unrunnable;
}
void from_json(const json& j, CampaignRow& v) {
  Fields f(j, "campaign");
  f.req("campaign_id", v.campaign_id);
  f.req("name", v.name);
  f.req("total", v.total);
  f.req("finished", v.finished);
  f.req("pass", v.pass);
  f.req("failed", v.failed);
  f.nullable("best", v.best);
  f.req("submitted_wall_ms", v.submitted_wall_ms);
  f.req("complete", v.complete);
  std::string kind;
  f.with_default("kind", kind);
  v.is_study = kind == "study";
  v.amdahl.clear();
  v.studies.clear();
  if (v.is_study) {
    f.req("amdahl", v.amdahl);
    f.req("studies", v.studies);
  }
  v.cancelled = false;
  v.cancelled_jobs = 0;
  v.cancel_reason.clear();
  f.with_default("cancelled", v.cancelled);
  if (v.cancelled) {
    f.req("cancelled_jobs", v.cancelled_jobs);
    f.req("cancel_reason", v.cancel_reason);
  }
  v.unrunnable = 0;
  f.with_default("unrunnable", v.unrunnable);
}

void to_json(json& j, const StatusReply& v) {
  j = {{"jobs", v.jobs},
       {"results", v.results},
       {"workers", v.workers},
       {"campaigns", v.campaigns},
       {"uptime_s", v.uptime_s},
       {"version", v.version},
       {"results_per_hour", v.results_per_hour}};
  if (!v.unrunnable.empty()) j["unrunnable"] = v.unrunnable;
}
void from_json(const json& j, StatusReply& v) {
  Fields f(j, "STATUS reply");
  f.req("jobs", v.jobs);
  f.req("results", v.results);
  f.req("workers", v.workers);
  f.req("campaigns", v.campaigns);
  f.req("uptime_s", v.uptime_s);
  f.req("version", v.version);
  f.req("results_per_hour", v.results_per_hour);
  f.with_default("unrunnable", v.unrunnable);
}

void to_json(json& j, const KernelBenchTaskRow& v) {
  j = {{"mode", v.mode},
       {"level", v.level},
       {"problem_id", v.problem_id},
       {"problem_name", v.problem_name},
       {"sample_id", v.sample_id},
       {"backend", v.backend},
       {"precision", v.precision},
       {"compile", v.compile},
       {"compile_mode", v.compile_mode}};
}
void from_json(const json& j, KernelBenchTaskRow& v) {
  Fields f(j, "task");
  f.req("mode", v.mode);
  f.req("level", v.level);
  f.req("problem_id", v.problem_id);
  f.req("problem_name", v.problem_name);
  f.req("sample_id", v.sample_id);
  f.req("backend", v.backend);
  f.req("precision", v.precision);
  f.req("compile", v.compile);
  f.req("compile_mode", v.compile_mode);
}

namespace {
// A passed-through value: as it came (a null included), or nullopt when absent.
std::optional<json> passthrough(const json& j, const char* k) {
  return j.contains(k) ? std::optional<json>(j.at(k)) : std::nullopt;
}
}  // namespace

void to_json(json& j, const KernelBenchBaseline& v) {
  j = v.other.is_object() ? v.other : json::object();
  put_if(j, "ok", v.ok);
  put_if(j, "error", v.error);
  put_if(j, "mean_ms", v.mean_ms);
  put_if(j, "stats", v.stats);
  put_if(j, "hardware", v.hardware);
  put_if(j, "device", v.device);
  put_if(j, "phases_s", v.phases_s);
}
void from_json(const json& j, KernelBenchBaseline& v) {
  Fields f(j, "baseline");
  f.maybe("ok", v.ok);
  f.maybe("error", v.error);
  f.maybe("mean_ms", v.mean_ms);
  v.stats = passthrough(j, "stats");
  f.maybe("hardware", v.hardware);
  f.maybe("device", v.device);
  f.maybe("phases_s", v.phases_s);
  v.other = others(j, {"ok", "error", "mean_ms", "hardware", "device", "phases_s"}, {"stats"});
}

void to_json(json& j, const KernelBenchVerdict& v) {
  j = v.other.is_object() ? v.other : json::object();
  put_if(j, "mode", v.mode);
  put_if(j, "step", v.step);
  put_if(j, "verdict", v.verdict);
  put_if(j, "compiled", v.compiled);
  put_if(j, "correctness", v.correctness);
  put_if(j, "runtime_ms", v.runtime_ms);
  put_if(j, "ref_runtime_ms", v.ref_runtime_ms);
  put_if(j, "metadata", v.metadata);
  put_if(j, "runtime_stats", v.runtime_stats);
  put_if(j, "strict", v.strict);
  put_if(j, "judge", v.judge);
  put_if(j, "witness", v.witness);
  put_if(j, "baseline", v.baseline);
  put_if(j, "task", v.task);
}
void from_json(const json& j, KernelBenchVerdict& v) {
  Fields f(j, "kernelbench");
  f.maybe("mode", v.mode);
  f.maybe("step", v.step);
  f.maybe("verdict", v.verdict);
  f.maybe("compiled", v.compiled);
  f.maybe("correctness", v.correctness);
  f.maybe("runtime_ms", v.runtime_ms);
  f.maybe("ref_runtime_ms", v.ref_runtime_ms);
  v.metadata = passthrough(j, "metadata");
  v.runtime_stats = passthrough(j, "runtime_stats");
  v.strict = passthrough(j, "strict");
  v.judge = passthrough(j, "judge");
  v.witness = passthrough(j, "witness");
  f.maybe("baseline", v.baseline);
  f.maybe("task", v.task);
  v.other = others(
      j, {"mode", "step", "verdict", "compiled", "correctness", "runtime_ms", "ref_runtime_ms", "baseline", "task"},
      {"metadata", "runtime_stats", "strict", "judge", "witness"});
}

Result<KernelBenchVerdict> parse_kernelbench_verdict(const json& doc) {
  try {
    return doc.get<KernelBenchVerdict>();
  } catch (const std::exception& e) {
    return Status::invalid(std::string("KernelBench result does not match KernelBenchVerdict: ") + e.what());
  }
}

void to_json(json& j, const ModelProfile& v) { j = v.raw; }
void to_json(json& j, const ModelOpRow& v) {
  j = {{"op", v.op},
       {"kernel_type", v.kernel_type},
       {"shape", v.shape},
       {"layout", v.layout},
       {"dtype", v.dtype},
       {"calls_per_iter", v.calls_per_iter},
       {"us_per_iter", v.us_per_iter},
       {"share", v.share},
       {"bound", v.bound}};
}
void to_json(json& j, const ModelTargetRow& v) {
  j = {{"kernel_type", v.kernel_type}, {"shape", v.shape}, {"dtype", v.dtype}, {"layout", v.layout}, {"ops", v.ops},
       {"us_per_iter", v.us_per_iter}, {"share", v.share}, {"bound", v.bound}};
}
void to_json(json& j, const ModelUncoveredRow& v) {
  j = {{"op", v.op}, {"us_per_iter", v.us_per_iter}, {"share", v.share}};
}
void from_json(const json& j, ModelOpRow& v) {
  Fields f(j, "model op");
  f.req("op", v.op);
  f.req("kernel_type", v.kernel_type);
  f.req("shape", v.shape);
  f.req("layout", v.layout);
  f.req("dtype", v.dtype);
  f.req("calls_per_iter", v.calls_per_iter);
  f.req("us_per_iter", v.us_per_iter);
  f.req("share", v.share);
  f.req("bound", v.bound);
}
void from_json(const json& j, ModelTargetRow& v) {
  Fields f(j, "model target");
  f.req("kernel_type", v.kernel_type);
  f.req("shape", v.shape);
  f.req("dtype", v.dtype);
  f.req("layout", v.layout);
  f.req("ops", v.ops);
  f.req("us_per_iter", v.us_per_iter);
  f.req("share", v.share);
  f.req("bound", v.bound);
}
void from_json(const json& j, ModelUncoveredRow& v) {
  Fields f(j, "uncovered op");
  f.req("op", v.op);
  f.req("us_per_iter", v.us_per_iter);
  f.req("share", v.share);
}
void from_json(const json& j, ModelProfile& v) {
  Fields f(j, "model");
  f.req("model", v.model);
  f.req("device", v.device);
  f.req("dtype", v.dtype);
  f.req("mode", v.mode);
  f.maybe("gpu", v.gpu);
  f.maybe("error", v.error);
  f.maybe("total_us_per_iter", v.total_us_per_iter);
  f.maybe("unattributed_us_per_iter", v.unattributed_us_per_iter);
  std::optional<std::vector<ModelOpRow>> ops;
  std::optional<std::vector<ModelTargetRow>> targets;
  std::optional<std::vector<ModelUncoveredRow>> uncovered;
  f.maybe("ops", ops);
  f.maybe("targets", targets);
  f.maybe("uncovered", uncovered);
  v.ops = ops.value_or(std::vector<ModelOpRow>{});
  v.targets = targets.value_or(std::vector<ModelTargetRow>{});
  v.uncovered = uncovered.value_or(std::vector<ModelUncoveredRow>{});
  v.raw = j;
}

Result<ModelProfile> parse_model_profile(const json& doc) {
  try {
    return doc.get<ModelProfile>();
  } catch (const std::exception& e) {
    return Status::invalid(std::string("model profile does not match ModelProfile: ") + e.what());
  }
}

void from_json(const json& j, ModelTiming& v) {
  Fields f(j, "timing");
  f.with_default("median_us", v.median_us);
  f.with_default("p10_us", v.p10_us);
  f.with_default("p90_us", v.p90_us);
}
void from_json(const json& j, ModelForcedDecode& v) {
  Fields f(j, "forced decoding");
  f.with_default("agree", v.agree);
  f.with_default("ties", v.ties);
  f.with_default("near_ties", v.near_ties);
  f.maybe("largest_gap", v.largest_gap);
  f.maybe("tolerance", v.tolerance);
  f.maybe("first_difference", v.first_difference);
  f.with_default("identical_but_ties", v.identical_but_ties);
}
void from_json(const json& j, ModelDecode& v) {
  Fields f(j, "decode");
  f.with_default("tokens", v.tokens);
  f.with_default("identical", v.identical);
  f.maybe("first_difference", v.first_difference);
  f.maybe("margin_at_difference", v.margin_at_difference);
  f.maybe("forced", v.forced);
}
void from_json(const json& j, ModelOutputs& v) {
  Fields f(j, "outputs");
  f.req("pass", v.pass);
  f.with_default("tuned_error", v.tuned_error);
  f.with_default("original_error", v.original_error);
  f.with_default("limit", v.limit);
}
void from_json(const json& j, ModelReplacedCall& v) {
  Fields f(j, "replaced call");
  f.with_default("function", v.function);
  f.with_default("kernel_type", v.kernel_type);
  f.with_default("shape", v.shape);
  f.with_default("calls_per_forward", v.calls_per_forward);
}
void from_json(const json& j, ModelFallbackCall& v) {
  Fields f(j, "fallback");
  f.with_default("function", v.function);
  f.with_default("reason", v.reason);
  f.with_default("calls_per_forward", v.calls_per_forward);
}
void from_json(const json& j, ModelSkippedKernel& v) {
  Fields f(j, "kernel left out");
  f.with_default("kernel_type", v.kernel_type);
  f.with_default("shape", v.shape);
  f.with_default("reason", v.reason);
}

Result<ModelVerifyReport> parse_model_verify(const json& doc) {
  try {
    Fields f(doc, "verify report");
    ModelVerifyReport v;
    f.with_default("model", v.model);
    f.with_default("device", v.device);
    f.with_default("dtype", v.dtype);
    f.maybe("gpu", v.gpu);
    f.maybe("outputs", v.outputs);
    f.maybe("decode", v.decode);
    if (doc.contains("time") && doc.at("time").is_object())
      for (const auto& [name, t] : doc.at("time").items())
        if (t.is_object()) v.time[name] = read_as<ModelTiming>(t, "time");  // "protocol" is its text
    if (doc.contains("graph_time") && doc.at("graph_time").is_object()) {
      Fields g(doc.at("graph_time"), "graph_time");
      g.maybe("eager", v.graph_eager);
      g.maybe("tuned", v.graph_tuned);
      g.maybe("speedup", v.graph_speedup);
    }
    f.maybe("predicted_speedup", v.predicted_speedup);
    f.maybe("speedup_vs_eager", v.speedup_vs_eager);
    f.maybe("speedup_vs_compile", v.speedup_vs_compile);
    f.with_default("replaced", v.replaced);
    f.with_default("fallbacks", v.fallbacks);
    f.with_default("kernels_skipped", v.kernels_skipped);
    v.raw = doc;
    return v;
  } catch (const std::exception& e) {
    return Status::invalid(std::string("verify report does not match ModelVerifyReport: ") + e.what());
  }
}

// A macro list, one name per entry.
// clang-format off
#define AK_ROW_FIELDS(X, N)                                                                                           \
  X(experiment)                                                                                                       \
  X(tag) X(kernel_type) N(throughput_tflops) N(latency_us) N(pct_peak) N(speedup_vs_pytorch) X(correctness)           \
      N(peak_vram_mb) X(description) X(job_id) X(attempt) X(gpu) X(worker) X(shape) X(dtype) X(config) X(source_hash) \
          X(backend) N(baseline_us) N(bandwidth_gbps) N(samples) N(cv) X(compile_ms) N(cold_l2) N(rel_se)             \
              X(max_abs_error) X(verification) N(flops) N(bytes) N(bound) N(pct_peak_datasheet) N(peak_tflops)        \
                  N(input_sets) N(audit_us) N(stop_reason) N(sm_clock_mhz) N(power_w) N(temperature_c)                \
                      N(clock_reasons) N(throttled) X(stage) X(reason) X(campaign_id) X(completed_wall_ms)
// clang-format on

void to_json(json& j, const ResultRow& v) {
  j = json::object();
#define X(f) j[#f] = v.f;
#define N(f) j[#f] = nullable_json(v.f);
  AK_ROW_FIELDS(X, N)
#undef X
#undef N
  put_if(j, "cache_resident", v.cache_resident);
  put_if(j, "kernelbench", v.kernelbench);
  put_if(j, "model", v.model);
}
void from_json(const json& j, ResultRow& v) {
  Fields f(j, "row");
#define X(k) f.req(#k, v.k);
#define N(k) f.nullable(#k, v.k);
  AK_ROW_FIELDS(X, N)
#undef X
#undef N
  f.maybe("cache_resident", v.cache_resident);
  f.maybe("kernelbench", v.kernelbench);
  f.maybe("model", v.model);
}
#undef AK_ROW_FIELDS

void to_json(json& j, const ResultsReply& v) { j = {{"rows", v.rows}}; }
void from_json(const json& j, ResultsReply& v) {
  Fields f(j, "RESULTS reply");
  f.req("rows", v.rows);
}

void to_json(json& j, const CoordinatorReadyLine& v) {
  j = {{"workers", v.workers},
       {"clients", v.clients},
       {"metrics_port", v.metrics_port},
       {"redis", v.redis},
       {"pid", v.pid}};
}
void from_json(const json& j, CoordinatorReadyLine& v) {
  Fields f(j, "READY line");
  f.req("workers", v.workers);
  f.req("clients", v.clients);
  f.req("metrics_port", v.metrics_port);
  f.req("redis", v.redis);
  f.req("pid", v.pid);
}

namespace {
template <typename T>
const char* reply_type_name();
#define AK_PROTOCOL_NAME(T)          \
  template <>                        \
  const char* reply_type_name<T>() { \
    return #T;                       \
  }
AK_PROTOCOL_REPLY_TYPES(AK_PROTOCOL_NAME)
#undef AK_PROTOCOL_NAME
}  // namespace

template <typename T>
Result<T> parse_reply(const json& body) {
  try {
    return body.get<T>();
  } catch (const std::exception& e) {
    return Status::internal(std::string("coordinator reply does not match ") + reply_type_name<T>() + ": " + e.what() +
                            "; are the CLI and the coordinator of the same version?");
  }
}

#define AK_PROTOCOL_INSTANTIATE(T) template Result<T> parse_reply<T>(const json& body);
AK_PROTOCOL_REPLY_TYPES(AK_PROTOCOL_INSTANTIATE)
#undef AK_PROTOCOL_INSTANTIATE

}  // namespace ak::protocol
