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
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/job.h"
#include "common/tuning.h"

namespace ak::protocol {

inline constexpr int kProtocolVersion = 1;
// Largest frame a peer may send us [bytes]. Job sources are a few KiB; 4 MiB leaves room for
// large candidate files while bounding what one bad peer can make us parse.
inline constexpr size_t kMaxFrameBytes = 4u << 20;

enum class ErrorCode {
  kUnknown = 0,
  kMalformed,        // not JSON, or JSON without the envelope fields
  kUnknownType,
  kBadVersion,
  kOversized,
  kBadBody,          // envelope fine, body does not match the message's schema
  kUnknownWorker,    // a worker message from a peer that has not sent READY (re-send READY)
  kIdentityMismatch, // worker_id in the body differs from the connection's routing id
  kBadRequest,       // a client request the coordinator cannot satisfy (bad campaign ...)
  kStoreUnavailable, // the coordinator could not write to Redis; retry later
  kInternal,
};
const char* error_code_name(ErrorCode c);  // "MALFORMED", ...; used as a metric label

// ---- worker -> coordinator
struct Ready {
  std::string worker_id;
  Capabilities caps;
  int slots = 1;  // how many jobs the worker wants leased at once (running + prefetching)
};
struct InFlight {
  std::string job_id;
  int attempt = 0;
};
struct Heartbeat {
  std::string worker_id;
  std::vector<InFlight> in_flight;  // jobs the worker holds; their leases are renewed
};
struct ResultMsg {
  std::string worker_id;
  ResultRecord result;
};
struct Disconnect {
  std::string worker_id;
  std::string reason;
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
struct Reply {
  nlohmann::json body;  // request-specific; see PROTOCOL.md
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

}  // namespace ak::protocol
