#include "common/protocol.h"

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
    case ErrorCode::kInternal: return "INTERNAL";
  }
  return "UNKNOWN";
}

namespace {

struct Encoder {
  json operator()(const Ready& m) const {
    return {{"worker_id", m.worker_id}, {"caps", m.caps}, {"slots", m.slots}};
  }
  json operator()(const Heartbeat& m) const {
    json inflight = json::array();
    for (const auto& f : m.in_flight) inflight.push_back({{"job_id", f.job_id}, {"attempt", f.attempt}});
    return {{"worker_id", m.worker_id}, {"in_flight", inflight}};
  }
  json operator()(const ResultMsg& m) const { return {{"worker_id", m.worker_id}, {"result", m.result}}; }
  json operator()(const Disconnect& m) const { return {{"worker_id", m.worker_id}, {"reason", m.reason}}; }
  json operator()(const Job& m) const { return {{"spec", m.spec}, {"attempt", m.attempt}, {"lease_ms", m.lease_ms}}; }
  json operator()(const Ack& m) const { return {{"job_id", m.job_id}, {"attempt", m.attempt}}; }
  json operator()(const CancelJob& m) const { return {{"job_id", m.job_id}, {"attempt", m.attempt}}; }
  json operator()(const Cancel& m) const { return {{"campaign_id", m.campaign_id}, {"reason", m.reason}}; }
  json operator()(const Error& m) const { return {{"code", error_code_name(m.code)}, {"message", m.message}}; }
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
  for (int i = 0; i <= static_cast<int>(ErrorCode::kInternal); ++i)
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
  if (type == "READY") return Ready{b.at("worker_id").get<std::string>(), b.at("caps").get<Capabilities>(), b.value("slots", 1)};
  if (type == "HEARTBEAT") {
    Heartbeat h{b.at("worker_id").get<std::string>(), {}};
    for (const auto& f : b.at("in_flight")) h.in_flight.push_back({f.at("job_id").get<std::string>(), f.at("attempt").get<int>()});
    return h;
  }
  if (type == "RESULT") return ResultMsg{b.at("worker_id").get<std::string>(), b.at("result").get<ResultRecord>()};
  if (type == "DISCONNECT") return Disconnect{b.at("worker_id").get<std::string>(), b.value("reason", "")};
  if (type == "JOB") return Job{b.at("spec").get<JobSpec>(), b.at("attempt").get<int>(), b.at("lease_ms").get<int64_t>()};
  if (type == "ACK") return Ack{b.at("job_id").get<std::string>(), b.at("attempt").get<int>()};
  if (type == "CANCEL_JOB") return CancelJob{b.at("job_id").get<std::string>(), b.at("attempt").get<int>()};
  if (type == "CANCEL") return Cancel{b.at("campaign_id").get<std::string>(), b.value("reason", "")};
  if (type == "ERROR") return Error{parse_error_code(b.at("code").get<std::string>()), b.value("message", "")};
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

}  // namespace ak::protocol
