// Coordinator: the farm's one coordinator process, assembled around a FarmCore.
//
// Owns two ZeroMQ ROUTER sockets: one for workers (worker protocol, common/protocol.h) and one
// for clients (REQ sockets of the CLI: SUBMIT, STATUS, RESULTS, BEST, IMPORT_BEST, CANCEL). It
// decodes frames, hands the messages to its FarmCore (coordinator/farm_core.h: the bookkeeping,
// which writes through to the store) and carries out what the core answers: messages to workers
// and clients, and the metrics. It never lets an exception or a bad frame stop it: every bad input
// gets an ERROR reply and a protocol-error count.
//
// start() rebuilds state from the store (so a restarted coordinator continues where the old one
// stopped) and binds; run() serves until `stop` becomes true. One thread calls start() and run().
//
// Authentication (issue 19; PROTOCOL.md, "Authentication"): with CoordinatorOptions::curve both
// sockets are CURVE servers and a ZAP handler (coordinator/auth.h), serviced in the poll loop,
// admits only the keys of the workers' and the clients' allow-lists (ZAP domains "workers" and
// "clients"); each message's User-Id (the sender's key) goes to the FarmCore with the message.
// Without CURVE, start() binds loopback endpoints only, unless `insecure` says otherwise.
// Refusals are counted by reason (autokernel_peer_refusals_total) and logged at most once per
// peer per refusal_log_interval_ms.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "common/clock.h"
#include "common/rate_limit.h"
#include "coordinator/auth.h"
#include "coordinator/farm_core.h"
#include "coordinator/metrics.h"
#include "coordinator/scheduler.h"
#include "coordinator/store/store.h"

namespace ak {

struct CoordinatorOptions {
  std::string worker_endpoint = "tcp://127.0.0.1:5555";  // "tcp://127.0.0.1:*" picks a free port
  std::string client_endpoint = "tcp://127.0.0.1:5556";
  SchedulerOptions scheduler;
  // FarmCoreOptions' caps (coordinator/farm_core.h).
  int64_t max_jobs_per_submit = 20'000;
  int64_t max_jobs_per_campaign = 20'000;
  int64_t tick_ms = 100;  // how often leases are checked [ms]
  // The coordinator's CURVE key pair; none: no authentication (loopback only, see `insecure`).
  std::optional<CurveKeyPair> curve;
  AllowList allow_workers;  // with curve: the workers' keys
  AllowList allow_clients;  // with curve: the clients' keys and roles
  // Without curve, bind endpoints beyond loopback anyway (every peer that reaches them is trusted).
  bool insecure = false;
  int64_t refusal_log_interval_ms = 10'000;
  // Client requests per peer address (common/PROTOCOL.md, "Limits"): over the rate a request is
  // answered with an ERROR instead of being decoded and served.
  TokenBucketOptions client_rate;
  // Messages ZeroMQ queues per peer connection before it stops reading from that peer (TCP
  // back-pressure); with ZMQ_MAXMSGSIZE this bounds what one peer can make the coordinator hold.
  int worker_rcvhwm = 8;
  int client_rcvhwm = 2;
  int sndhwm = 1000;
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
  // Sends what the core asked for and counts it in the metrics.
  void carry_out(FarmEffects& effects);
  void send_worker(const std::string& worker_id, const protocol::Message& m);
  void reply_client(const std::string& identity, const std::string& frame);
  // A frame that did not decode: an ERROR to its sender and a count.
  void protocol_error(const std::string& identity, protocol::ErrorCode code, const std::string& message);
  // Job and worker gauges after every batch; the per-campaign series and the unrunnable count
  // (built from a full STATUS snapshot, O(jobs)) at most once a second.
  void refresh_gauges();
  int64_t next_snapshot_ms_ = 0;
  // Answers the waiting ZAP requests (handshakes of connecting peers).
  void answer_zap();
  // The role of a client key under CURVE (kAdmin without CURVE).
  ClientPeer client_peer(const std::string& key) const;
  // A log line for a refusal of `peer`'s frame, at most one per peer per interval.
  void log_refusal(const std::string& peer, const std::string& what);

  CoordinatorOptions options_;
  const Clock& clock_;
  CoordinatorMetrics& metrics_;
  FarmCore core_;
  zmq::context_t ctx_;
  std::unique_ptr<ZapHandler> zap_;  // with curve; before the sockets, which it outlives
  RefusalLog refusal_log_;
  zmq::socket_t workers_;
  zmq::socket_t clients_;
  std::string worker_endpoint_;
  std::string client_endpoint_;
  PeerRateLimiter client_limiter_;
  LogThrottle frame_refusal_log_;
};

}  // namespace ak
