// CoordinatorClient: the CLI's side of the client API (SUBMIT, STATUS, RESULTS, BEST, IMPORT_BEST,
// CANCEL) over a ZeroMQ REQ socket. Each call returns the request's typed reply
// (common/protocol.h, "replies"), decoded in common/protocol.cc; an ERROR reply, a reply that does
// not decode and a transport failure come back as a Status. Each call waits at most `timeout`; on
// a timeout the socket is recreated (a REQ socket that missed a reply is stuck otherwise) and
// kTimedOut returned — the request may or may not have been processed. Not thread-safe; one per
// thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "common/protocol.h"
#include "common/status.h"

namespace ak {

// CURVE keys of a client (PROTOCOL.md, "Authentication"), Z85: the coordinator's public key and
// this client's key pair. All empty: no CURVE (a coordinator without keys, on loopback).
struct CurveClientKeys {
  std::string server_key;
  std::string public_key;
  std::string secret_key;
};

class CoordinatorClient {
 public:
  explicit CoordinatorClient(std::string endpoint, std::chrono::milliseconds timeout = std::chrono::seconds(30),
                             CurveClientKeys keys = {});
  // Submits a campaign document (coordinator/campaign.h); the reply names the campaign.
  Result<protocol::SubmitReply> submit(const nlohmann::json& campaign);
  Result<protocol::StatusReply> status();
  // Waits (at most wait, on the coordinator) until the state version exceeds after_version.
  Result<protocol::StatusReply> status_after(int64_t after_version, std::chrono::milliseconds wait);
  // Rows in the column order of common/result_fields.h.
  Result<protocol::ResultsReply> results(const std::string& campaign_id = "", const std::string& status = "");
  Result<protocol::ResultsReply> results(const protocol::ResultsQuery& q);
  // The tuning database's entries that `q` matches, as an export document (common/tuning.h).
  Result<protocol::BestReply> best(const TuningQuery& q);
  // Merges an export document into the farm's tuning database.
  Result<protocol::ImportBestReply> import_best(const nlohmann::json& document);
  // Cancels a campaign (PROTOCOL.md, CANCEL).
  Result<protocol::CancelReply> cancel(const std::string& campaign_id, const std::string& reason = "");
  // Sends any message and returns the reply body undecoded (tests use it for bad requests).
  Result<nlohmann::json> request(const protocol::Message& m, std::chrono::milliseconds extra_wait = {});

 private:
  template <typename T>
  Result<T> typed(const protocol::Message& m, std::chrono::milliseconds extra_wait = {});
  void reconnect();
  std::string endpoint_;
  std::chrono::milliseconds timeout_;
  CurveClientKeys keys_;
  zmq::context_t ctx_;
  std::unique_ptr<zmq::socket_t> sock_;
};

}  // namespace ak
