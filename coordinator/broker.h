// Coordinator: the farm's one coordinator process, assembled around a Scheduler.
//
// Owns two ZeroMQ ROUTER sockets: one for workers (worker protocol, common/protocol.h) and one
// for clients (REQ sockets of the CLI: SUBMIT, STATUS, RESULTS, BEST, IMPORT_BEST). It executes the scheduler's
// actions against the store (write-through; a result is stored before it is acknowledged) and
// the sockets, keeps the metrics current, and never lets an exception or a bad frame stop it:
// every bad input gets an ERROR reply and a protocol-error count.
//
// start() rebuilds state from the store (so a restarted coordinator continues where the old one
// stopped) and binds; run() serves until `stop` becomes true. One thread calls start() and run().
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "common/clock.h"
#include "coordinator/store/store.h"
#include "coordinator/metrics.h"
#include "coordinator/scheduler.h"
#include "coordinator/study.h"

namespace ak {

struct CoordinatorOptions {
  std::string worker_endpoint = "tcp://127.0.0.1:5555";  // "tcp://127.0.0.1:*" picks a free port
  std::string client_endpoint = "tcp://127.0.0.1:5556";
  SchedulerOptions scheduler;
  int64_t tick_ms = 100;  // how often leases are checked [ms]
};

class Coordinator {
 public:
  Coordinator(CoordinatorOptions options, Store& store, const Clock& clock, CoordinatorMetrics& metrics);
  ~Coordinator();

  Status start();
  // Endpoints actually bound (after start()).
  const std::string& worker_endpoint() const { return worker_endpoint_; }
  const std::string& client_endpoint() const { return client_endpoint_; }
  Status run(const std::atomic<bool>& stop);

 private:
  void on_worker_message(const std::string& identity, std::vector<zmq::message_t>& frames);
  void on_client_message(std::vector<zmq::message_t>& frames);
  nlohmann::json handle_client(const protocol::Message& m, protocol::Error* error);
  protocol::StatusReply status_body() const;
  protocol::ResultsReply results_body(const protocol::ResultsQuery& q) const;
  void execute(std::vector<Action> actions);
  void send_worker(const std::string& worker_id, const protocol::Message& m);
  void protocol_error(const std::string& identity, protocol::ErrorCode code, const std::string& message);
  void refresh_gauges();
  void reply_client(const std::string& identity, const std::string& frame);
  // Answers the STATUS long polls whose version has passed or whose deadline has come.
  void answer_waiters(int64_t now_ms);
  // Study campaigns: new proposals for the worker slots of each GPU model that no job holds or
  // waits for (coordinator/study.h). Called after every event that may free a slot or stop a
  // study, and on ticks (wall-time budgets).
  void drive_studies();
  StudyProgress progress_of(const std::string& campaign_id) const;
  // The tuning database: offers a stored result to the store's best entries and keeps best_ in
  // step. A failed write is logged and counted; start() offers every stored result again, so an
  // entry lost to a crash or an unavailable store comes back on the next start.
  void offer_best(const JobRecord& job, const ResultRecord& result);
  Status store_best(const TunedEntry& entry, bool* stored);
  nlohmann::json import_best(const nlohmann::json& document, protocol::Error* error);
  nlohmann::json cancel_campaign(const protocol::Cancel& q, protocol::Error* error);

  CoordinatorOptions options_;
  Store& store_;
  const Clock& clock_;
  CoordinatorMetrics& metrics_;
  Scheduler scheduler_;
  zmq::context_t ctx_;
  zmq::socket_t workers_;
  zmq::socket_t clients_;
  std::string worker_endpoint_;
  std::string client_endpoint_;
  std::map<std::string, CampaignRecord> campaigns_;
  std::map<std::string, StudyCampaign> studies_;  // study campaigns by campaign id
  // Study campaigns found complete (every study done, nothing in flight), which they then stay:
  // drive_studies() no longer rebuilds their progress on every event and tick.
  std::set<std::string> studies_complete_;
  std::map<std::string, ResultRecord> results_;
  std::map<std::string, TunedEntry> best_;         // by tuning_key
  std::map<std::string, Capabilities> worker_caps_;  // each worker's last READY, for provenance
  std::vector<std::string> result_order_;
  std::map<std::string, int64_t> first_dispatch_ms_;
  int64_t started_ms_ = 0;
  int64_t results_since_start_ = 0;
  // Bumped on every event that changes what STATUS shows; STATUS long polls wait on it.
  int64_t version_ = 0;
  struct Waiter {
    std::string identity;
    int64_t after_version;
    int64_t deadline_ms;
  };
  std::vector<Waiter> waiters_;
};

}  // namespace ak
