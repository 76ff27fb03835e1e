// Scheduler: the job lifecycle as a pure state machine.
//
// Events go in (a worker said READY, a heartbeat arrived, a result arrived, time passed, jobs were
// submitted) together with the current monotonic time; the scheduler updates its state and returns
// the actions the caller must perform, in order. It does no I/O and reads no clock, so tests drive
// it with a fake clock and inspect the actions. FarmCore (coordinator/farm_core.h) executes the
// actions: Persist* against the store, Send* handed to the Coordinator's ROUTER socket.
//
// Ordering contract for results: on_result returns PersistResult followed by SendAck. The caller
// must perform them in order and must not send the ACK if the store write failed (a result is
// stored before it is acknowledged); the worker then resends it, and the scheduler treats the
// resend as a fresh delivery (its state only changes when the caller confirms the write with
// commit_result()). Duplicates by (job_id, attempt), and late results of superseded attempts of a
// job that is already DONE, produce only a SendAck.
//
// Lease rules: a job is leased to at most one worker at a time. A heartbeat listing a job renews
// its lease to now + lease_ms. A lease that reaches its expiry requeues the job with its reason
// recorded; the next delivery carries attempt + 1. When a job has been delivered max_attempts times
// and its last lease expires (or its worker dies), it ends LOST with every attempt's reason, and a
// LOST result row is stored. A worker silent for longer than worker_timeout_ms is forgotten and
// its leases are requeued at once. A lease also ends early (issue 19) when
//  - its holder's heartbeats stop listing it: the second heartbeat received after the lease was
//    granted (or adopted) that does not list the job with its attempt releases it (the first may
//    have left the worker before the JOB reached it);
//  - its holder sends READY again while registered: that is a new process under the same id (a
//    worker sends READY when it starts and when the coordinator does not know it), which holds
//    nothing of its predecessor's.
//
// Results (issue 19): only the lease holder may report. A result is stored when the job is leased
// to the sending worker at the attempt the result names. A result of an attempt whose lease has
// ended (an older attempt, or the current one after its lease expired or was released) is
// acknowledged so that the worker drops it from its outbox, and not stored: the job's next attempt
// reports instead. Anything else (the attempt is leased to another worker, or is ahead of the
// job's: a job never delivered at that attempt) is refused with FORBIDDEN and not stored. The
// caller must store a delivery (PersistJob) before sending it (SendJob), and drop the SendJob when
// that write failed, so that no worker holds an attempt the store does not know.
//
// Not thread-safe: one thread owns a Scheduler.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "common/job.h"
#include "common/protocol.h"
#include "common/status.h"
#include "coordinator/store/store.h"

namespace ak {

struct SchedulerOptions {
  int64_t lease_ms = 10'000;           // lease duration, renewed by each heartbeat
  int64_t worker_timeout_ms = 15'000;  // silence after which a worker is forgotten
  int max_attempts = 3;                // deliveries before a job ends LOST
};

// ---- actions
struct SendJob {
  std::string worker_id;
  protocol::Job job;
};
struct SendAck {
  std::string worker_id;
  protocol::Ack ack;
};
struct SendError {
  std::string worker_id;
  protocol::Error error;
};
struct SendCancel {
  std::string worker_id;
  protocol::CancelJob cancel;
};
// Write the record through to the store (state transition of a job that is not a result).
struct PersistJob {
  JobRecord job;
};
// Store `result` as the job's one result row together with the job's final record, then call
// Scheduler::commit_result(job_id) if the write succeeded.
struct PersistResult {
  ResultRecord result;
  JobRecord job;
};
using Action = std::variant<SendJob, SendAck, SendError, SendCancel, PersistJob, PersistResult>;

struct WorkerView {
  std::string worker_id;
  Capabilities caps;
  int slots = 0;
  int64_t last_seen_ms = 0;
  std::set<std::string> leased;  // job ids currently leased to this worker
  // Per leased job: heartbeats received since the lease was granted that did not list it.
  std::map<std::string, int> unlisted;
};

// Why on_result refused a result (for metrics and logs; see the result rules above).
enum class ResultRefusal { kNone = 0, kStaleAttempt, kNotLeased };

struct SchedulerCounts {
  int64_t queued = 0, leased = 0, done = 0, lost = 0;
  std::map<ResultStatus, int64_t> by_status;  // stored results by status
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerOptions options);

  // Rebuild from the store after a restart. A lease held at the time of the crash waits for its
  // worker to re-register (READY adopts it) for one lease from the moment a coordinator first
  // found it orphaned (JobRecord::orphaned_wall_ms, by the wall clock `wall_ms`), not a fresh
  // lease on every restart: returns PersistJob for each lease found orphaned for the first time,
  // which records that moment.
  std::vector<Action> restore(const StoreSnapshot& snapshot, int64_t now_ms, int64_t wall_ms);

  // New jobs (ids must be unique; a known id is an error and nothing is added). Returns
  // PersistJob for each and any SendJob that free slots allow.
  Result<std::vector<Action>> submit(std::vector<JobSpec> jobs, int64_t now_ms);

  std::vector<Action> on_ready(const protocol::Ready& m, int64_t now_ms);
  std::vector<Action> on_heartbeat(const protocol::Heartbeat& m, int64_t now_ms);
  // `refusal` (optional) says whether and why the result was not taken.
  std::vector<Action> on_result(const protocol::ResultMsg& m, int64_t now_ms, ResultRefusal* refusal = nullptr);
  std::vector<Action> on_disconnect(const protocol::Disconnect& m, int64_t now_ms);
  // Expire leases and forget silent workers; call at least every few hundred ms.
  std::vector<Action> on_tick(int64_t now_ms);

  // Cancels a campaign's unfinished jobs: a queued one ends at once with a CANCELLED row
  // (PersistResult); a leased one stays leased until its worker's result, and its worker gets
  // SendCancel (again with the job's heartbeats, in case it was lost, and when its worker
  // re-registers); a lease of the campaign that ends without a result (expiry, a worker gone) ends
  // the job CANCELLED instead of requeueing it. Idempotent. `counts` (optional) gets how many jobs
  // ended now, are running and told to stop, and had ended before.
  struct CancelCounts {
    int64_t cancelled = 0, stopping = 0, finished = 0;
  };
  std::vector<Action> cancel(const std::string& campaign_id, const std::string& reason, int64_t now_ms,
                             CancelCounts* counts = nullptr);
  bool cancelled(const std::string& campaign_id) const { return cancelled_.contains(campaign_id); }

  // The caller stored the PersistResult for job_id: the job becomes DONE (or stays LOST).
  // Returns dispatches that the freed slot allows.
  std::vector<Action> commit_result(const std::string& job_id, int64_t now_ms);

  // Empty Status when all invariants hold, else which one broke (run after every event in tests
  // and debug builds):
  //  - a job is leased by at most one worker, and the worker's leased set agrees with the job;
  //  - every leased job has a known worker and an unexpired lease after on_tick(now);
  //  - every queued job is in the queue exactly once; done/lost jobs are not in the queue;
  //  - a worker never holds more leases than its slots.
  Status check_invariants(int64_t now_ms) const;

  SchedulerCounts counts() const;
  const std::map<std::string, JobRecord>& jobs() const { return jobs_; }
  const std::map<std::string, WorkerView>& workers() const { return workers_; }
  int64_t heartbeats_missed() const { return heartbeats_missed_; }
  bool all_finished() const;  // no job queued or leased, and every result row committed
  // Queued jobs that no registered worker can run. by_need counts them by the first of their
  // requirements (backend, then GPU model, then arch) that no worker meets together with the ones
  // before it: "backend cuda", "gpu_model NVIDIA H100 80GB HBM3", "arch sm_90a"; by_campaign counts
  // the same jobs by campaign id (a campaign with none is absent). Both empty when every queued job
  // fits some worker. One pass: O(queued jobs + distinct requirements x workers).
  struct Stranded {
    std::map<std::string, int64_t> by_need;
    std::map<std::string, int64_t> by_campaign;
  };
  Stranded stranded() const;
  const SchedulerOptions& options() const { return options_; }

 private:
  bool matches(const Requirements& r, const Capabilities& c) const;
  void dispatch(int64_t now_ms, std::vector<Action>* out);
  // Ends the current lease of `job` (which must be kLeased): requeues it, or ends it LOST when
  // its attempts are spent. A job whose result awaits commit_result is requeued but parked
  // (dispatch skips it) and never made LOST: its result row is on its way.
  void expire(JobRecord& job, const std::string& reason, int64_t now_ms, std::vector<Action>* out);
  // Removes job_id from the leased set of its holder (a registered worker or an orphan entry).
  void release_lease(const JobRecord& job);
  // Forgets a registered worker and expires every lease it held, with `reason`.
  void forget_worker(const std::string& worker_id, const std::string& reason, int64_t now_ms,
                     std::vector<Action>* out);
  static JobRecord finished_record(const JobRecord& job, JobState state);
  // Ends `job` (not leased, no pending row) with a CANCELLED row of its campaign's reason.
  void end_cancelled(JobRecord& job, std::vector<Action>* out);
  // SendCancel for a leased job of a cancelled campaign, at most once per half lease: a message
  // lost on the way is sent again with a later heartbeat of the job.
  void tell_to_stop(const JobRecord& job, int64_t now_ms, std::vector<Action>* out);

  SchedulerOptions options_;
  std::map<std::string, JobRecord> jobs_;
  std::deque<std::string> queue_;  // job ids in state kQueued, FIFO
  std::map<std::string, WorkerView> workers_;
  std::map<std::string, ResultRecord> pending_results_;  // awaiting commit_result
  std::map<ResultStatus, int64_t> by_status_;
  std::map<std::string, std::string> cancelled_;  // campaign id -> the reason given
  std::map<std::string, int64_t> cancel_sent_ms_;  // job id -> when its worker was last told to stop
  int64_t heartbeats_missed_ = 0;
  // Leases restored from the store whose worker has not re-sent READY since the restart, by
  // worker id. The worker's READY adopts them; otherwise on_tick expires them like any lease.
  std::map<std::string, std::set<std::string>> orphan_leases_;
  // now_ms of the latest on_tick: every lease must expire after it (check_invariants).
  int64_t last_tick_ms_ = INT64_MIN;
  // The worker that received the latest dispatch; ties between equally loaded workers go to the
  // next one after it, so that work spreads round robin.
  std::string last_dispatched_worker_;
};

}  // namespace ak
