// FarmCore: the coordinator's bookkeeping without sockets. It owns the Scheduler and everything
// the farm knows beside it (campaigns, study campaigns, the tuning database, result rows, STATUS
// long-poll waiters), executes the scheduler's store actions against the Store (write-through: a
// result is stored before it is acknowledged) and answers each event with FarmEffects: the
// messages to send to workers and clients, and what the metrics must count. Coordinator
// (coordinator/coordinator.h) owns the sockets: it decodes frames, hands the messages to FarmCore
// and carries out the effects.
//
// Pure apart from the Store and the Clock it is given (tests use MemoryStore and FakeClock): no
// sockets, no threads. No exception leaves a handler: a request that fails is an ERROR reply, a
// worker message that fails an ERROR to the worker. With FarmCoreOptions::check_invariants,
// Scheduler::check_invariants runs after every event; the first broken invariant is logged and
// kept (broken_invariant()), and a debug build aborts on it.
//
// Not thread-safe: one thread owns a FarmCore, its Store and the Scheduler inside.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/protocol.h"
#include "common/rate_limit.h"
#include "common/status.h"
#include "coordinator/campaign.h"
#include "coordinator/scheduler.h"
#include "coordinator/store/store.h"
#include "coordinator/study.h"

namespace ak {

// What an authenticated client may do (coordinator/auth.h; PROTOCOL.md, "Authentication"):
// kSubmit submits campaigns, cancels its own and reads everything; kAdmin also cancels any
// campaign and imports tuning entries.
enum class ClientRole { kSubmit = 0, kAdmin };
const char* client_role_name(ClientRole r);  // "submit", "admin"

// Who sent a client request. `key` is the CURVE public key (Z85) the ZAP handler admitted; empty
// where the coordinator runs without CURVE (loopback only), where every client may do everything.
struct ClientPeer {
  std::string key;
  ClientRole role = ClientRole::kAdmin;
};

struct FarmCoreOptions {
  SchedulerOptions scheduler;
  // Jobs one SUBMIT may plan (a plain or KernelBench campaign's jobs, a study campaign's studies),
  // and jobs a study campaign may propose over its life; more is refused naming the count and
  // the cap (common/PROTOCOL.md, "Limits").
  int64_t max_jobs_per_submit = 20'000;
  int64_t max_jobs_per_campaign = 20'000;
  // Run Scheduler::check_invariants after every event. On in debug builds; tests turn it on.
#ifdef NDEBUG
  bool check_invariants = false;
#else
  bool check_invariants = true;
#endif
};

// What one event asks of the socket side, in the order it happened.
struct FarmEffects {
  struct ToWorker {
    std::string worker_id;  // the ROUTER routing id
    protocol::Message message;
  };
  struct ToClient {
    std::string identity;       // the REQ peer's routing id
    protocol::Message message;  // a protocol::Reply or a protocol::Error
  };
  struct Completed {
    ResultStatus status = ResultStatus::kPass;
    double duration_s = -1;  // first dispatch to stored result [s]; -1: none (cancelled, or unknown)
  };
  std::vector<ToWorker> to_workers;
  std::vector<ToClient> to_clients;
  // For CoordinatorMetrics.
  int64_t dispatched = 0;
  int64_t requeued = 0;
  int64_t store_errors = 0;
  int64_t duplicate_results = 0;
  std::vector<Completed> completed;
  std::vector<protocol::ErrorCode> errors;  // every ERROR sent, to workers and clients
  // Requests refused because the peer may not make them (issue 19): counted by reason and logged
  // at most once per peer per interval by the Coordinator, not per frame.
  struct Refusal {
    std::string peer;    // the routing id (a worker id, a client's REQ identity)
    std::string reason;  // metric label: "not_leased", "stale_attempt", "key_mismatch", "worker_id_in_use",
                         // "not_owner", "not_admin"
    std::string detail;  // for the log
  };
  std::vector<Refusal> refusals;
};

class FarmCore {
 public:
  FarmCore(FarmCoreOptions options, Store& store, const Clock& clock);

  // Rebuilds campaigns, jobs, results and the tuning database from the store (a restarted
  // coordinator continues where the old one stopped); campaigns cancelled before the restart stay
  // cancelled. kUnavailable when the store cannot be read. Call once, before anything else.
  Status start(FarmEffects* out);

  // A decoded worker message from the peer with routing id `identity` (READY, HEARTBEAT, RESULT,
  // DISCONNECT; anything else is answered UNKNOWN_TYPE). `key`: the peer's CURVE public key, empty
  // without CURVE. A worker id is bound to the key of the READY that registered it: while it is
  // registered, messages under that id from another key are refused (FORBIDDEN, "key_mismatch").
  // Likewise a worker id is bound to the instance of the READY that registered it: while it is
  // registered, messages under it that name another instance are refused (WORKER_ID_IN_USE,
  // refusal "worker_id_in_use"); the same instance may register again at once (a restart).
  void on_worker(const std::string& identity, const protocol::Message& m, FarmEffects* out,
                 const std::string& key = {});
  // A decoded client request. Its reply (REPLY with the request's reply struct, or ERROR) goes to
  // out->to_clients, except a STATUS long poll whose version has not passed: it waits until
  // answer_waiters() answers it. With a key, a campaign submitted is owned by it; CANCEL of
  // another key's campaign and IMPORT_BEST need ClientRole::kAdmin (else FORBIDDEN).
  void on_client(const std::string& identity, const protocol::Message& m, FarmEffects* out,
                 const ClientPeer& peer = {});
  // Time passed: expires leases, forgets silent workers, drives studies (wall-time budgets).
  void on_tick(FarmEffects* out);
  // Answers the STATUS long polls whose version has passed or whose deadline has come.
  void answer_waiters(FarmEffects* out);

  // The replies, for the socket side and tests.
  protocol::StatusReply status() const;
  protocol::ResultsReply results(const protocol::ResultsQuery& q) const;
  protocol::BestReply best(const TuningQuery& q) const;

  const Scheduler& scheduler() const { return scheduler_; }
  // Bumped on every event that changes what STATUS shows.
  int64_t version() const { return version_; }
  size_t waiting() const { return waiters_.size(); }
  // The first invariant found broken (ok while none was, or while checks are off).
  const Status& broken_invariant() const { return broken_invariant_; }

 private:
  // The reply to a request, or an error (error->message not empty).
  nlohmann::json handle_client(const protocol::Message& m, const ClientPeer& peer, protocol::Error* error,
                               FarmEffects* out);
  void handle_worker(const std::string& identity, const std::string& key, const protocol::Message& m, FarmEffects* out);
  void execute(std::vector<Action> actions, FarmEffects* out);
  void worker_error(const std::string& worker_id, protocol::ErrorCode code, const std::string& message,
                    FarmEffects* out);
  // Study campaigns: new proposals for the worker slots of each GPU model that no job holds or
  // waits for (coordinator/study.h). Called after every event that may free a slot or stop a
  // study, and on ticks (wall-time budgets).
  void drive_studies(FarmEffects* out);
  StudyProgress progress_of(const std::string& campaign_id) const;
  // What a SUBMIT may plan now: the caps and the device memory of the connected workers.
  PlanLimits plan_limits() const;
  // The source table: each candidate source once, by xxh64_hex (JobSpec::source_hash). Stores
  // the entries not known yet, then keeps them; kUnavailable when the store refused them.
  Status add_sources(std::map<std::string, std::string> sources, FarmEffects* out);
  // Moves the text of jobs that carry one inline into the table (study proposals).
  Status intern_sources(std::vector<JobSpec>* jobs, FarmEffects* out);
  // The spec with its source text, as a worker or the tuning database needs it.
  JobSpec with_source(const JobSpec& spec) const;
  // The tuning database: offers a stored result to the store's best entries and keeps best_ in
  // step. A failed write is logged and counted; start() offers every stored result again, so an
  // entry lost to a crash or an unavailable store comes back on the next start.
  void offer_best(const JobRecord& job, const ResultRecord& result, FarmEffects* out);
  Status store_best(const TunedEntry& entry, bool* stored, FarmEffects* out);
  nlohmann::json import_best(const nlohmann::json& document, const ClientPeer& peer, protocol::Error* error,
                             FarmEffects* out);
  nlohmann::json cancel_campaign(const protocol::Cancel& q, const ClientPeer& peer, protocol::Error* error,
                                 FarmEffects* out);
  void check_invariants();
  // Store failures come in floods while Redis is down: one line per 10 s, with the count of the
  // lines left out (common/rate_limit.h). Worker protocol errors likewise, per worker.
  void log_store_error(const std::string& line);

  FarmCoreOptions options_;
  Store& store_;
  const Clock& clock_;
  Scheduler scheduler_;
  std::map<std::string, CampaignRecord> campaigns_;
  std::map<std::string, StudyCampaign> studies_;  // study campaigns by campaign id
  // Study campaigns found complete (every study done, nothing in flight), which they then stay:
  // drive_studies() no longer rebuilds their progress on every event and tick.
  std::set<std::string> studies_complete_;
  std::set<std::string> capped_;  // study campaigns that reached max_jobs_per_campaign (logged once)
  std::map<std::string, ResultRecord> results_;
  std::map<std::string, std::string> sources_;       // xxh64_hex -> candidate source
  std::map<std::string, TunedEntry> best_;           // by tuning_key
  std::map<std::string, Capabilities> worker_caps_;  // each worker's last READY, for provenance
  std::map<std::string, std::string> worker_keys_;   // worker id -> CURVE key of the READY that registered it
  // worker id -> the instance of the READY that registered it (protocol::Ready::instance)
  std::map<std::string, std::string> worker_instances_;
  std::vector<std::string> result_order_;
  std::map<std::string, int64_t> first_dispatch_ms_;
  int64_t started_ms_ = 0;
  int64_t results_since_start_ = 0;
  int64_t version_ = 0;
  struct Waiter {
    std::string identity;
    int64_t after_version;
    int64_t deadline_ms;
  };
  std::vector<Waiter> waiters_;
  Status broken_invariant_;
  LogThrottle log_throttle_{10'000};
};

}  // namespace ak
