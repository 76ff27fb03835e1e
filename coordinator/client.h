// CoordinatorClient: the CLI's side of the client API (SUBMIT, STATUS, RESULTS, BEST, IMPORT_BEST, CANCEL) over a ZeroMQ
// REQ socket. Each call waits at most `timeout`; on a timeout the socket is recreated (a REQ
// socket that missed a reply is stuck otherwise) and kTimedOut returned — the request may or may
// not have been processed. Not thread-safe; one per thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "common/protocol.h"
#include "common/status.h"

namespace ak {

class CoordinatorClient {
 public:
  explicit CoordinatorClient(std::string endpoint, std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Returns the campaign id and job count: {"campaign_id": ..., "jobs": N}.
  Result<nlohmann::json> submit(const nlohmann::json& campaign);
  Result<nlohmann::json> status();
  // Waits (at most wait, on the coordinator) until the state version exceeds after_version.
  Result<nlohmann::json> status_after(int64_t after_version, std::chrono::milliseconds wait);
  // {"rows": [...]} in the column order of common/result_fields.h.
  Result<nlohmann::json> results(const std::string& campaign_id = "", const std::string& status = "");
  Result<nlohmann::json> results(const protocol::ResultsQuery& q);
  // The tuning database's entries that `q` matches, as an export document (common/tuning.h).
  Result<nlohmann::json> best(const TuningQuery& q);
  // Merges an export document into the farm's tuning database: {"entries", "stored", "kept"}.
  Result<nlohmann::json> import_best(const nlohmann::json& document);
  // Cancels a campaign: {"campaign_id", "cancelled", "stopping", "finished"} (PROTOCOL.md, CANCEL).
  Result<nlohmann::json> cancel(const std::string& campaign_id, const std::string& reason = "");
  // Sends any message and returns the reply body (tests use it for bad requests).
  Result<nlohmann::json> request(const protocol::Message& m, std::chrono::milliseconds extra_wait = {});

 private:
  void reconnect();
  std::string endpoint_;
  std::chrono::milliseconds timeout_;
  zmq::context_t ctx_;
  std::unique_ptr<zmq::socket_t> sock_;
};

}  // namespace ak
