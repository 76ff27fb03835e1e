// Property tests of the scheduler (coordinator/scheduler.h): a simulated farm of workers, a
// MemoryStore that fails at times and coordinator restarts, driven by a seeded RNG. The
// invariants are checked after every event; at the end every job has exactly one result row and
// ended DONE or LOST exactly once.
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/scheduler.h"
#include "coordinator/store/memory_store.h"
#include "tests/coordinator/scheduler_harness.h"

namespace ak {
namespace {

using testing::cpu_caps;
using testing::gpu_caps;
using testing::make_job;

struct SimWorker {
  std::string id;
  Capabilities caps;
  int slots = 1;
  bool alive = true;
  bool registered = false;            // what the worker believes
  std::map<std::string, int> held;    // job id -> attempt it is running
  std::vector<ResultRecord> outbox;   // results not yet acknowledged
};

// Executes scheduler actions the way FarmCore does: Persist* against the store, commit after
// a successful result write, no ACK after a failed one; Send* delivered to simulated workers.
class Farm {
 public:
  explicit Farm(SchedulerOptions options) : options_(options), sched_(std::make_unique<Scheduler>(options)) {}

  Scheduler& sched() { return *sched_; }
  MemoryStore& store() { return store_; }
  int64_t now = 1'000'000;
  std::vector<SimWorker> workers;
  std::map<std::string, int> rows_inserted;  // job id -> put_result calls that inserted the row
  std::vector<std::string> job_ids;
  bool store_up = true;
  // What the run went through, so the test can tell that it exercised the hard paths.
  int restarts = 0;
  int failed_result_writes = 0;
  int lost_rows = 0;

  void add_worker(std::string id, Capabilities caps, int slots) {
    SimWorker w;
    w.id = std::move(id);
    w.caps = std::move(caps);
    w.slots = slots;
    workers.push_back(std::move(w));
  }

  SimWorker* worker(const std::string& id) {
    for (auto& w : workers)
      if (w.id == id) return &w;
    return nullptr;
  }

  void set_store_up(bool up) {
    store_up = up;
    store_.set_available(up);
  }

  void submit(std::vector<JobSpec> jobs) {
    for (const auto& j : jobs) job_ids.push_back(j.job_id);
    auto r = sched_->submit(std::move(jobs), now);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    apply(r.value());
  }

  void restart() {
    auto snap = store_.load();
    ASSERT_TRUE(snap.ok());
    sched_ = std::make_unique<Scheduler>(options_);
    apply_actions(sched_->restore(snap.value(), now, now));
    ++restarts;
    check();
  }

  // Every event's actions go through here, so the invariants are checked after every event.
  void apply(const std::vector<Action>& actions) {
    apply_actions(actions);
    check();
  }

  void apply_actions(const std::vector<Action>& actions) {
    std::set<std::pair<std::string, int>> unstored_leases;  // not sent, as FarmCore does
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      if (const auto* p = std::get_if<PersistJob>(&a)) {
        // A failed job write is repaired by the next one; a lease not stored is not sent.
        if (!store_.put_jobs({p->job}).ok() && p->job.state == JobState::kLeased)
          unstored_leases.insert({p->job.spec.job_id, p->job.attempt});
      } else if (const auto* p = std::get_if<PersistResult>(&a)) {
        bool inserted = false;
        if (store_.put_result(p->result, p->job, &inserted).ok()) {
          rows_inserted[p->result.job_id] += inserted ? 1 : 0;
          if (inserted && p->result.status == ResultStatus::kLost) ++lost_rows;
          apply(sched_->commit_result(p->result.job_id, now));
          check();
        } else {
          ++failed_result_writes;
          if (i + 1 < actions.size() && std::holds_alternative<SendAck>(actions[i + 1])) {
            ++i;  // never acknowledge what is not stored
          }
        }
      } else if (const auto* s = std::get_if<SendAck>(&a)) {
        SimWorker* w = worker(s->worker_id);
        ASSERT_NE(w, nullptr);
        std::erase_if(w->outbox, [&](const ResultRecord& r) {
          return r.job_id == s->ack.job_id && r.attempt == s->ack.attempt;
        });
      } else if (const auto* s = std::get_if<SendJob>(&a)) {
        SimWorker* w = worker(s->worker_id);
        ASSERT_NE(w, nullptr);
        if (w->alive && !unstored_leases.count({s->job.spec.job_id, s->job.attempt}))
          w->held[s->job.spec.job_id] = s->job.attempt;
      } else if (const auto* s = std::get_if<SendError>(&a)) {
        SimWorker* w = worker(s->worker_id);
        ASSERT_NE(w, nullptr);
        ASSERT_EQ(s->error.code, protocol::ErrorCode::kUnknownWorker) << s->error.message;
        w->registered = false;
      }
    }
  }

  // Invariants of the scheduler, and agreement between it and what the store holds.
  void check() {
    Status s = sched_->check_invariants(now);
    ASSERT_TRUE(s.ok()) << s.to_string();
    for (const auto& [id, n] : rows_inserted) {
      ASSERT_LE(n, 1) << "job " << id << " got a second result row";
      const JobState st = sched_->jobs().at(id).state;
      ASSERT_TRUE(st == JobState::kDone || st == JobState::kLost)
          << "job " << id << " has a stored row but is " << job_state_name(st);
    }
  }

  // ---- worker behaviour
  void ready(SimWorker& w) {
    w.registered = true;
    apply(sched_->on_ready({w.id, w.caps, w.slots}, now));
  }
  void heartbeat(SimWorker& w) {
    protocol::Heartbeat hb{w.id, {}};
    for (const auto& [job, attempt] : w.held) hb.in_flight.push_back({job, attempt});
    apply(sched_->on_heartbeat(hb, now));
  }
  void finish(SimWorker& w, const std::string& job, ResultStatus status) {
    ResultRecord r;
    r.job_id = job;
    r.attempt = w.held.at(job);
    r.status = status;
    r.worker_id = w.id;
    w.held.erase(job);
    w.outbox.push_back(r);
    send(w, r);
  }
  void send(SimWorker& w, const ResultRecord& r) { apply(sched_->on_result({w.id, r}, now)); }
  void tick(int64_t advance_ms) {
    now += advance_ms;
    apply(sched_->on_tick(now));
  }

 private:
  SchedulerOptions options_;
  std::unique_ptr<Scheduler> sched_;
  MemoryStore store_;
};

JobSpec random_job(std::mt19937_64& rng, const std::string& id) {
  switch (rng() % 4) {
    case 0: return make_job(id, Backend::kCuda);
    case 1: return make_job(id, Backend::kCuda, "nvidia h200");
    case 2: return make_job(id, Backend::kCuda, "", "sm_80");
    default: return make_job(id);
  }
}

ResultRecord result_of(const std::string& job, int attempt) {
  ResultRecord r;
  r.job_id = job;
  r.attempt = attempt;
  r.status = ResultStatus::kPass;
  return r;
}

ResultStatus random_status(std::mt19937_64& rng) {
  static const ResultStatus kStatuses[] = {ResultStatus::kPass, ResultStatus::kPass,
                                           ResultStatus::kFail, ResultStatus::kCompileError,
                                           ResultStatus::kTimeout, ResultStatus::kCrash};
  return kStatuses[rng() % std::size(kStatuses)];
}

struct FarmStats {
  int restarts = 0, failed_result_writes = 0, lost_rows = 0, jobs = 0;
};

void run_random_farm(uint64_t seed, FarmStats* stats) {
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto chance = [&](int percent) { return static_cast<int>(rng() % 100) < percent; };
  SchedulerOptions o;
  o.lease_ms = 1'000;
  o.worker_timeout_ms = 3'000;
  o.max_attempts = 3;
  Farm farm(o);
  const int n_workers = 3 + static_cast<int>(rng() % 6);
  for (int i = 0; i < n_workers; ++i) {
    const int slots = 1 + static_cast<int>(rng() % 3);
    switch (i % 3) {
      case 0: farm.add_worker("cpu" + std::to_string(i), cpu_caps(), slots); break;
      case 1: farm.add_worker("h200-" + std::to_string(i), gpu_caps("NVIDIA H200", "sm_90a"), slots); break;
      default: farm.add_worker("a100-" + std::to_string(i), gpu_caps("NVIDIA A100", "sm_80"), slots);
    }
  }
  int next_job = 0;
  auto submit_batch = [&] {
    std::vector<JobSpec> batch;
    const int n = 1 + static_cast<int>(rng() % 20);
    for (int i = 0; i < n; ++i) batch.push_back(random_job(rng, "job" + std::to_string(next_job++)));
    farm.submit(std::move(batch));
  };
  submit_batch();

  for (int step = 0; step < 4'000 && !::testing::Test::HasFatalFailure(); ++step) {
    SimWorker& w = farm.workers[rng() % farm.workers.size()];
    const int event = static_cast<int>(rng() % 100);
    if (event < 5) {
      if (farm.store_up && next_job < 300) submit_batch();
    } else if (event < 30) {
      if (w.alive) w.registered ? farm.heartbeat(w) : farm.ready(w);
    } else if (event < 55) {
      if (w.alive && !w.held.empty()) {
        auto it = std::next(w.held.begin(), static_cast<long>(rng() % w.held.size()));
        farm.finish(w, it->first, random_status(rng));
      }
    } else if (event < 62) {
      if (w.alive && !w.outbox.empty()) farm.send(w, w.outbox[rng() % w.outbox.size()]);
    } else if (event < 85) {
      farm.tick(static_cast<int64_t>(rng() % 700));
    } else if (event < 88) {
      w.alive = false;  // kill -9: running jobs and the in-memory outbox are gone
      w.held.clear();
      w.outbox.clear();
    } else if (event < 92) {
      if (!w.alive) {
        w.alive = true;
        w.registered = false;
      }
    } else if (event < 94) {
      if (w.alive && w.registered) {
        w.registered = false;
        w.held.clear();  // stops its work; unacknowledged results stay in the outbox
        farm.apply(farm.sched().on_disconnect({w.id, "shutting down"}, farm.now));
      }
    } else if (event < 98) {
      farm.set_store_up(chance(60) ? true : !farm.store_up);
    } else {
      if (farm.store_up) farm.restart();
    }
    farm.check();
  }
  ASSERT_FALSE(::testing::Test::HasFatalFailure());

  // Drain: the store comes back, every worker runs and reports what it holds.
  farm.set_store_up(true);
  for (auto& w : farm.workers) w.alive = true;
  bool drained = false;
  for (int round = 0; round < 2'000 && !drained; ++round) {
    for (auto& w : farm.workers) {
      if (!w.registered) farm.ready(w);
      farm.heartbeat(w);
      while (!w.held.empty()) farm.finish(w, w.held.begin()->first, random_status(rng));
      const auto outbox = w.outbox;
      for (const auto& r : outbox) farm.send(w, r);
    }
    farm.tick(200);
    farm.check();
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    drained = farm.sched().all_finished();
    for (const auto& w : farm.workers) drained = drained && w.outbox.empty();
  }
  ASSERT_TRUE(drained) << "the farm did not finish its jobs";

  auto snap = farm.store().load();
  ASSERT_TRUE(snap.ok());
  std::map<std::string, const ResultRecord*> rows;
  std::map<ResultStatus, int64_t> row_status;
  for (const auto& r : snap->results) {
    EXPECT_TRUE(rows.emplace(r.job_id, &r).second) << "two rows for job " << r.job_id;
    ++row_status[r.status];
  }
  EXPECT_EQ(rows.size(), farm.job_ids.size());
  for (const auto& id : farm.job_ids) {
    EXPECT_EQ(farm.rows_inserted[id], 1) << "job " << id << " must end exactly once";
    ASSERT_TRUE(rows.count(id)) << "job " << id << " has no result row";
    const JobRecord& job = farm.sched().jobs().at(id);
    const bool lost = rows[id]->status == ResultStatus::kLost;
    EXPECT_EQ(job.state, lost ? JobState::kLost : JobState::kDone) << id;
    if (lost) {
      EXPECT_EQ(rows[id]->attempt_reasons.size(), static_cast<size_t>(o.max_attempts)) << id;
    }
  }
  for (const auto& j : snap->jobs) {
    EXPECT_TRUE(j.state == JobState::kDone || j.state == JobState::kLost)
        << "stored record of " << j.spec.job_id << " is " << job_state_name(j.state);
  }
  EXPECT_EQ(farm.sched().counts().by_status, row_status);
  stats->restarts += farm.restarts;
  stats->failed_result_writes += farm.failed_result_writes;
  stats->lost_rows += farm.lost_rows;
  stats->jobs += static_cast<int>(farm.job_ids.size());
}

TEST(SchedulerInvariantsTest, ARandomFarmEndsEveryJobExactlyOnceWithOneRowPerJob) {
  FarmStats stats;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    run_random_farm(seed, &stats);
    if (HasFatalFailure()) return;
  }
  // The seeds must reach the paths the guarantees are about.
  EXPECT_GT(stats.restarts, 10);
  EXPECT_GT(stats.failed_result_writes, 10);
  EXPECT_GT(stats.lost_rows, 10);
  EXPECT_GT(stats.jobs, 1'000);
  std::printf("random farm: %d jobs, %d LOST, %d restarts, %d failed result writes\n", stats.jobs,
              stats.lost_rows, stats.restarts, stats.failed_result_writes);
}

TEST(SchedulerInvariantsTest, ActionsAppliedToAMemoryStoreLeaveOneRowPerJob) {
  SchedulerOptions o;
  o.lease_ms = 1'000;
  o.worker_timeout_ms = 3'000;
  o.max_attempts = 2;
  Farm farm(o);
  farm.add_worker("w1", cpu_caps(), 1);
  farm.add_worker("w2", cpu_caps(), 1);
  SimWorker& w1 = farm.workers[0];
  SimWorker& w2 = farm.workers[1];
  farm.submit({make_job("a"), make_job("b")});
  farm.ready(w1);  // a, attempt 1
  farm.ready(w2);  // b, attempt 1
  ASSERT_EQ(w1.held.count("a"), 1u);

  // w1 finishes a, but the store is down: nothing stored, nothing acknowledged.
  farm.set_store_up(false);
  farm.finish(w1, "a", ResultStatus::kPass);
  EXPECT_EQ(w1.outbox.size(), 1u);
  farm.set_store_up(true);
  farm.send(w1, w1.outbox[0]);  // the resend is stored and acknowledged
  EXPECT_TRUE(w1.outbox.empty());
  farm.send(w1, result_of("a", 1));

  // b's lease runs out on w2 twice: LOST. A late result of b changes nothing.
  farm.heartbeat(w1);
  farm.heartbeat(w2);
  farm.tick(1'000);
  farm.heartbeat(w1);
  farm.heartbeat(w2);
  farm.tick(1'000);
  EXPECT_EQ(farm.sched().jobs().at("b").state, JobState::kLost);
  farm.send(w2, result_of("b", 1));
  farm.check();

  auto snap = farm.store().load();
  ASSERT_TRUE(snap.ok());
  ASSERT_EQ(snap->results.size(), 2u);
  EXPECT_EQ(snap->results[0].job_id, "a");
  EXPECT_EQ(snap->results[0].status, ResultStatus::kPass);
  EXPECT_EQ(snap->results[1].job_id, "b");
  EXPECT_EQ(snap->results[1].status, ResultStatus::kLost);
  EXPECT_EQ(snap->results[1].attempt_reasons.size(), 2u);
  EXPECT_TRUE(farm.sched().all_finished());
}

TEST(SchedulerInvariantsTest, ARestartedCoordinatorLosesNoAcknowledgedResult) {
  SchedulerOptions o;
  o.lease_ms = 1'000;
  o.worker_timeout_ms = 3'000;
  Farm farm(o);
  farm.add_worker("w1", cpu_caps(), 2);
  SimWorker& w = farm.workers[0];
  farm.submit({make_job("a"), make_job("b"), make_job("c")});
  farm.ready(w);
  farm.finish(w, "a", ResultStatus::kPass);  // stored and acknowledged
  ASSERT_TRUE(w.outbox.empty());
  ASSERT_EQ(w.held.count("b"), 1u);

  farm.restart();
  EXPECT_EQ(farm.sched().jobs().at("a").state, JobState::kDone);
  EXPECT_EQ(farm.sched().jobs().at("b").state, JobState::kLeased);
  EXPECT_EQ(farm.sched().counts().by_status.at(ResultStatus::kPass), 1);

  farm.heartbeat(w);  // unknown to the new coordinator: told to send READY
  EXPECT_FALSE(w.registered);
  farm.ready(w);
  farm.heartbeat(w);
  farm.tick(900);
  farm.heartbeat(w);
  farm.tick(900);
  EXPECT_EQ(farm.sched().jobs().at("b").attempt, 1) << "b kept its lease across the restart";
  while (!w.held.empty()) farm.finish(w, w.held.begin()->first, ResultStatus::kPass);
  EXPECT_TRUE(farm.sched().all_finished());
  EXPECT_EQ(farm.store().result_count().value(), 3);
}

}  // namespace
}  // namespace ak
