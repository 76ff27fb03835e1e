// The pipe protocol between the worker daemon and its sandbox child (worker/sandbox/).
//
// The sandbox is started as `autokernel-sandbox --backend cpu|cuda --device N`, reads requests
// from stdin and writes replies to stdout, one JSON document per line ('\n'-terminated, no
// embedded newlines). Its stderr is the sandbox's log. Sequence:
//   1. sandbox -> worker: SandboxHello   (readiness handshake; the worker waits for it, no sleep)
//   2. worker -> sandbox: SandboxRequest ; sandbox -> worker: zero or more SandboxProgress lines
//      ({"progress": "<stage>"}, one as each stage starts), then one SandboxReply   (repeated)
//   3. EOF on stdin: the sandbox exits 0.
// If the sandbox does not reply within the job's timeout_ms the worker kills it (SIGKILL) and
// reports TIMEOUT; if it dies, CRASH; either with the stage of the last progress line. A fresh sandbox is started for the next job.
// A reply of status CRASH (a sticky CUDA error: the context is unusable) is the sandbox's last;
// it exits (code 3) right after writing it. A cuda sandbox without a usable GPU writes a hello
// with ready=false and the reason in `error`, then exits 1.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/job.h"

namespace ak {

struct SandboxHello {
  bool ready = false;
  std::string device;               // "NVIDIA H200" or "cpu"
  double copy_bandwidth_gbps = 0;   // measured at start: bytes read + written per second [GB/s]
  Ceilings ceilings;                // calibration at start and the datasheet entry (cuda)
  std::string torch_version;
  std::string error;                // set when !ready (e.g. CUDA backend asked for but no GPU)
};

struct SandboxRequest {
  JobSpec job;
  std::string artifact_path;  // .so (cpu) or .cubin (cuda) produced by worker/compiler.h
  std::string entry;          // symbol to call / kernel to launch
  double compile_ms = 0;      // copied into the measurement
};

struct SandboxProgress {
  std::string stage;  // the stage a request just entered: "load", "verify.smoke", ...
};

struct SandboxReply {
  ResultStatus status = ResultStatus::kFail;
  std::string stage;   // "load", "verify.<stage>", "measure", "audit"
  std::string reason;
  Measurement m;
};

inline void to_json(nlohmann::json& j, const SandboxHello& v) {
  j = {{"ready", v.ready}, {"device", v.device}, {"copy_bandwidth_gbps", v.copy_bandwidth_gbps},
       {"ceilings", v.ceilings}, {"torch_version", v.torch_version}, {"error", v.error}};
}
inline void from_json(const nlohmann::json& j, SandboxHello& v) {
  v.ready = j.at("ready").get<bool>();
  v.device = j.value("device", "");
  v.copy_bandwidth_gbps = j.value("copy_bandwidth_gbps", 0.0);
  v.ceilings = j.value("ceilings", Ceilings{});
  v.torch_version = j.value("torch_version", "");
  v.error = j.value("error", "");
}
inline void to_json(nlohmann::json& j, const SandboxRequest& v) {
  j = {{"job", v.job}, {"artifact_path", v.artifact_path}, {"entry", v.entry}, {"compile_ms", v.compile_ms}};
}
inline void from_json(const nlohmann::json& j, SandboxRequest& v) {
  v.job = j.at("job").get<JobSpec>();
  v.artifact_path = j.at("artifact_path").get<std::string>();
  v.entry = j.at("entry").get<std::string>();
  v.compile_ms = j.value("compile_ms", 0.0);
}
inline void to_json(nlohmann::json& j, const SandboxProgress& v) { j = {{"progress", v.stage}}; }

inline void to_json(nlohmann::json& j, const SandboxReply& v) {
  j = {{"status", result_status_name(v.status)}, {"stage", v.stage}, {"reason", v.reason}, {"measurement", v.m}};
}
inline void from_json(const nlohmann::json& j, SandboxReply& v) {
  auto s = parse_result_status(j.at("status").get<std::string>());
  if (!s) throw nlohmann::json::other_error::create(501, "unknown sandbox status", &j);
  v.status = *s;
  v.stage = j.value("stage", "");
  v.reason = j.value("reason", "");
  v.m = j.value("measurement", Measurement{});
}

}  // namespace ak
