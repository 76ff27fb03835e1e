// FarmCore (coordinator/farm_core.h) against the in-memory store and a fake clock: no sockets, no
// processes. Every event runs the scheduler's invariant checker (FarmCoreOptions::check_invariants),
// and each helper below asserts that nothing broke.
#include "coordinator/farm_core.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <sstream>

#include "common/hash.h"
#include "coordinator/store/memory_store.h"
#include "tests/coordinator/scheduler_harness.h"
#include "tests/integration/data/study_space.h"

namespace ak {
namespace {

using nlohmann::json;
namespace pr = protocol;
using testing::cpu_caps;

// A campaign of 24 CPU softmax jobs (every CPU configuration of one shape).
json softmax_campaign(const std::string& name = "softmax") {
  return {{"name", name},        {"kernel_type", "softmax"}, {"backend", "cpu"},
          {"shapes", {{8, 64}}}, {"dtypes", {"fp32"}},       {"configs", "all"}};
}
constexpr int64_t kSoftmaxJobs = 24;

class FarmCoreTest : public ::testing::Test {
 protected:
  FarmCoreTest() { core = make_core(); }

  std::unique_ptr<FarmCore> make_core() {
    FarmCoreOptions o;
    o.scheduler.lease_ms = 1'000;
    o.scheduler.worker_timeout_ms = 5'000;
    o.scheduler.max_attempts = 3;
    o.check_invariants = true;
    auto c = std::make_unique<FarmCore>(o, store, clock);
    FarmEffects fx;
    Status s = c->start(&fx);
    EXPECT_TRUE(s.ok()) << s.to_string();
    return c;
  }

  FarmEffects client(const pr::Message& m, const std::string& identity = "cli") {
    FarmEffects fx;
    core->on_client(identity, m, &fx);
    EXPECT_TRUE(core->broken_invariant().ok()) << core->broken_invariant().to_string();
    return fx;
  }
  FarmEffects worker(const std::string& id, const pr::Message& m) {
    FarmEffects fx;
    core->on_worker(id, m, &fx);
    EXPECT_TRUE(core->broken_invariant().ok()) << core->broken_invariant().to_string();
    return fx;
  }
  FarmEffects tick(int64_t advance_ms) {
    clock.advance(std::chrono::milliseconds(advance_ms));
    FarmEffects fx;
    core->on_tick(&fx);
    core->answer_waiters(&fx);
    EXPECT_TRUE(core->broken_invariant().ok()) << core->broken_invariant().to_string();
    return fx;
  }

  // The one reply of `fx`, decoded as T (a failed test and T{} when it is something else).
  template <typename T>
  T reply(const FarmEffects& fx) {
    EXPECT_EQ(fx.to_clients.size(), 1u);
    if (fx.to_clients.size() != 1) return T{};
    const auto* r = std::get_if<pr::Reply>(&fx.to_clients[0].message);
    EXPECT_NE(r, nullptr) << "an ERROR: " << pr::encode(fx.to_clients[0].message);
    if (!r) return T{};
    auto t = pr::parse_reply<T>(r->body);
    EXPECT_TRUE(t.ok()) << t.status().message();
    return t.ok() ? *t : T{};
  }
  static pr::Error error_of(const FarmEffects& fx) {
    EXPECT_EQ(fx.to_clients.size(), 1u);
    if (fx.to_clients.size() != 1) return {};
    const auto* e = std::get_if<pr::Error>(&fx.to_clients[0].message);
    EXPECT_NE(e, nullptr) << "not an ERROR: " << pr::encode(fx.to_clients[0].message);
    return e ? *e : pr::Error{};
  }

  pr::SubmitReply submit(const json& campaign) { return reply<pr::SubmitReply>(client(pr::Submit{campaign})); }

  // The JOB messages of `fx`, in order.
  static std::vector<pr::Job> jobs_sent(const FarmEffects& fx, const std::string& worker_id = "") {
    std::vector<pr::Job> out;
    for (const auto& w : fx.to_workers)
      if (const auto* j = std::get_if<pr::Job>(&w.message); j && (worker_id.empty() || w.worker_id == worker_id))
        out.push_back(*j);
    return out;
  }
  template <typename T>
  static std::vector<T> sent(const FarmEffects& fx) {
    std::vector<T> out;
    for (const auto& w : fx.to_workers)
      if (const auto* m = std::get_if<T>(&w.message)) out.push_back(*m);
    return out;
  }

  FarmEffects ready(const std::string& id, int slots) { return worker(id, pr::Ready{id, cpu_caps(), slots}); }

  // A result of `job` as the worker `id` reports it; PASS with `latency_us` unless told otherwise.
  FarmEffects result(const std::string& id, const pr::Job& job, double latency_us = 10.0,
                     ResultStatus status = ResultStatus::kPass) {
    ResultRecord r;
    r.job_id = job.spec.job_id;
    r.attempt = job.attempt;
    r.status = status;
    r.worker_id = id;
    r.gpu = "cpu";
    r.m.latency_us = latency_us;
    r.m.baseline_us = 20.0;
    r.m.speedup = 20.0 / latency_us;
    r.completed_wall_ms = clock.wall_ms();
    return worker(id, pr::ResultMsg{id, r});
  }

  // A copy: the reply it comes from is a temporary.
  static std::optional<pr::CampaignRow> campaign_row(const pr::StatusReply& st, const std::string& id) {
    for (const auto& c : st.campaigns)
      if (c.campaign_id == id) return c;
    ADD_FAILURE() << "campaign " << id << " not in STATUS";
    return std::nullopt;
  }

  MemoryStore store;
  FakeClock clock;
  std::unique_ptr<FarmCore> core;
};

// ---- submit

TEST_F(FarmCoreTest, ASubmitOverTheJobCapIsRefusedNamingTheCountAndTheCapAndStoresNothing) {
  FarmCoreOptions o;
  o.max_jobs_per_submit = 10;
  o.check_invariants = true;
  core = std::make_unique<FarmCore>(o, store, clock);
  FarmEffects started;
  ASSERT_TRUE(core->start(&started).ok());
  const pr::Error e = error_of(client(pr::Submit{softmax_campaign()}));
  EXPECT_EQ(e.code, pr::ErrorCode::kBadRequest);
  EXPECT_NE(e.message.find("campaign plans 1 x 24 = 24 jobs"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("at most 10 per campaign"), std::string::npos) << e.message;
  EXPECT_TRUE(store.load()->campaigns.empty());
  EXPECT_EQ(core->scheduler().jobs().size(), 0u);
}

TEST_F(FarmCoreTest, AShapeOverTheConnectedWorkersMemoryIsRefusedAtSubmit) {
  Capabilities small = cpu_caps();
  small.memory_bytes = int64_t{1} << 20;  // 1 MiB
  worker("w-small", pr::Ready{"w-small", small, 1});
  json doc = softmax_campaign();
  doc["shapes"] = {{1024, 1024}};  // 8 MiB moved per call in fp32
  const pr::Error e = error_of(client(pr::Submit{doc}));
  EXPECT_EQ(e.code, pr::ErrorCode::kBadRequest);
  EXPECT_NE(e.message.find("the largest connected cpu worker has 0.00105 GB"), std::string::npos) << e.message;
  EXPECT_EQ(submit(softmax_campaign()).jobs, kSoftmaxJobs);  // 8x64 fits
}

TEST_F(FarmCoreTest, StoreErrorsAreLoggedOncePerIntervalWithTheCountLeftOut) {
  std::ostringstream log;
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_st>(log)));
  submit(softmax_campaign());
  store.set_available(false);
  for (int i = 0; i < 20; ++i) ready("w-" + std::to_string(i), 1);  // each lease is a failed write
  auto lines = [&]() {
    std::istringstream in(log.str());
    std::vector<std::string> out;
    for (std::string l; std::getline(in, l);)
      if (l.find("store") != std::string::npos && l.find("[error]") != std::string::npos) out.push_back(l);
    return out;
  };
  EXPECT_EQ(lines().size(), 1u) << log.str();
  clock.advance(std::chrono::seconds(10));
  ready("w-late", 1);
  spdlog::set_default_logger(previous);
  const auto all = lines();
  ASSERT_EQ(all.size(), 2u) << log.str();
  EXPECT_NE(all[1].find("(19 more store errors since the last line)"), std::string::npos) << all[1];
}

TEST_F(FarmCoreTest, ACampaignKeepsItsSourceOnceAndEveryJobSentCarriesItAlsoAfterARestart) {
  json doc = softmax_campaign();
  const std::string source = "// candidate\n" + std::string(1 << 20, ' ');
  doc["source"] = source;
  EXPECT_EQ(submit(doc).jobs, kSoftmaxJobs);
  const std::string hash = xxh64_hex(source);
  // Stored once, named by every job; the queued jobs in memory hold no copy.
  auto snap = store.load();
  ASSERT_TRUE(snap.ok());
  ASSERT_EQ(snap->sources.size(), 1u);
  EXPECT_EQ(snap->sources.at(hash), source);
  ASSERT_EQ(snap->jobs.size(), size_t(kSoftmaxJobs));
  for (const auto& j : snap->jobs) {
    EXPECT_EQ(j.spec.source_hash, hash);
    EXPECT_TRUE(j.spec.source.empty());
  }
  for (const auto& [id, j] : core->scheduler().jobs()) EXPECT_TRUE(j.spec.source.empty()) << id;
  // On the wire a job carries its text and no hash: the worker protocol is unchanged.
  const auto sent = jobs_sent(ready("w1", 2));
  ASSERT_EQ(sent.size(), 2u);
  for (const auto& j : sent) {
    EXPECT_EQ(j.spec.source, source);
    EXPECT_TRUE(j.spec.source_hash.empty());
    EXPECT_EQ(json::parse(pr::encode(j)).at("body").at("spec").count("source_hash"), 0u);
  }
  // A restarted coordinator finds the text again in the store.
  core = make_core();
  const auto after = jobs_sent(ready("w2", 3));
  ASSERT_EQ(after.size(), 3u);
  for (const auto& j : after) EXPECT_EQ(j.spec.source, source);
  // A second campaign with the same source adds no second copy.
  submit(doc);
  EXPECT_EQ(store.load()->sources.size(), 1u);
}

TEST_F(FarmCoreTest, ASourceWhoseHashIsTakenByAnotherTextIsRefusedNotMerged) {
  // xxh64 is no cryptographic hash; a stored text under the hash of another stands for a collision.
  const std::string source = "// mine";
  ASSERT_TRUE(store.put_sources({{xxh64_hex(source), "// someone else's"}}).ok());
  core = make_core();
  json doc = softmax_campaign();
  doc["source"] = source;
  const pr::Error e = error_of(client(pr::Submit{doc}));
  EXPECT_EQ(e.code, pr::ErrorCode::kBadRequest);
  EXPECT_NE(e.message.find("of another stored source but a different text"), std::string::npos) << e.message;
  EXPECT_EQ(core->scheduler().jobs().size(), 0u);
}

TEST_F(FarmCoreTest, SubmitStoresTheCampaignQueuesItsJobsAndNamesItInTheReply) {
  const pr::SubmitReply r = submit(softmax_campaign("first"));
  EXPECT_FALSE(r.campaign_id.empty());
  EXPECT_EQ(r.jobs, kSoftmaxJobs);
  EXPECT_EQ(r.name, "first");
  EXPECT_FALSE(r.studies.has_value());
  EXPECT_EQ(core->scheduler().counts().queued, kSoftmaxJobs);
  auto snap = store.load();
  ASSERT_TRUE(snap.ok());
  ASSERT_EQ(snap->campaigns.size(), 1u);
  EXPECT_EQ(snap->campaigns[0].campaign_id, r.campaign_id);
  EXPECT_EQ(snap->jobs.size(), size_t(kSoftmaxJobs));
  const auto c = campaign_row(core->status(), r.campaign_id);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->total, kSoftmaxJobs);
  EXPECT_FALSE(c->complete);
}

TEST_F(FarmCoreTest, ACampaignThatDoesNotParseIsABadRequestAndNothingIsStored) {
  json bad = softmax_campaign();
  bad["shapez"] = bad["shapes"];
  bad.erase("shapes");
  const pr::Error e = error_of(client(pr::Submit{bad}));
  EXPECT_EQ(e.code, pr::ErrorCode::kBadRequest);
  EXPECT_NE(e.message.find("shapez"), std::string::npos) << e.message;
  EXPECT_TRUE(store.load()->campaigns.empty());
}

TEST_F(FarmCoreTest, ASubmitTheStoreCannotTakeIsStoreUnavailableAndCounted) {
  store.set_available(false);
  const FarmEffects fx = client(pr::Submit{softmax_campaign()});
  EXPECT_EQ(error_of(fx).code, pr::ErrorCode::kStoreUnavailable);
  EXPECT_EQ(fx.store_errors, 1);
  EXPECT_EQ(fx.errors, std::vector<pr::ErrorCode>{pr::ErrorCode::kStoreUnavailable});
  EXPECT_EQ(core->scheduler().jobs().size(), 0u);
}

TEST_F(FarmCoreTest, AWorkerMessageOnTheClientSocketIsUnknownType) {
  EXPECT_EQ(error_of(client(pr::Ready{"w1", cpu_caps(), 1})).code, pr::ErrorCode::kUnknownType);
}

// ---- workers and results

TEST_F(FarmCoreTest, AReadyWorkerGetsAsManyJobsAsItHasSlots) {
  submit(softmax_campaign());
  const FarmEffects fx = ready("w1", 2);
  EXPECT_EQ(jobs_sent(fx, "w1").size(), 2u);
  EXPECT_EQ(fx.dispatched, 2);
  EXPECT_EQ(core->scheduler().counts().leased, 2);
}

TEST_F(FarmCoreTest, AResultIsStoredThenAcknowledgedAndListedInResults) {
  const std::string cid = submit(softmax_campaign()).campaign_id;
  const pr::Job job = jobs_sent(ready("w1", 1)).at(0);
  clock.advance(std::chrono::milliseconds(250));
  const FarmEffects fx = result("w1", job, 12.5);
  const auto acks = sent<pr::Ack>(fx);
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].job_id, job.spec.job_id);
  ASSERT_EQ(fx.completed.size(), 1u);
  EXPECT_EQ(fx.completed[0].status, ResultStatus::kPass);
  EXPECT_DOUBLE_EQ(fx.completed[0].duration_s, 0.25);
  EXPECT_EQ(jobs_sent(fx, "w1").size(), 1u) << "the freed slot takes the next job";
  EXPECT_EQ(store.result_count().value(), 1);
  const pr::ResultsReply rows = core->results({cid, "", "", "", ""});
  ASSERT_EQ(rows.rows.size(), 1u);
  EXPECT_EQ(rows.rows[0].job_id, job.spec.job_id);
  EXPECT_EQ(rows.rows[0].correctness, "PASS");
  EXPECT_EQ(rows.rows[0].latency_us, 12.5);
  EXPECT_EQ(rows.rows[0].experiment, 1);
}

TEST_F(FarmCoreTest, AResultTheStoreCannotTakeIsNotAcknowledged) {
  submit(softmax_campaign());
  const pr::Job job = jobs_sent(ready("w1", 1)).at(0);
  store.set_available(false);
  const FarmEffects fx = result("w1", job);
  EXPECT_TRUE(sent<pr::Ack>(fx).empty());
  EXPECT_GE(fx.store_errors, 1);
  store.set_available(true);
  EXPECT_EQ(sent<pr::Ack>(result("w1", job)).size(), 1u) << "the worker's resend is stored and acknowledged";
}

TEST_F(FarmCoreTest, ADuplicateResultIsAcknowledgedAndCountedOnce) {
  submit(softmax_campaign());
  const pr::Job job = jobs_sent(ready("w1", 1)).at(0);
  result("w1", job);
  const FarmEffects again = result("w1", job);
  EXPECT_EQ(sent<pr::Ack>(again).size(), 1u);
  EXPECT_TRUE(again.completed.empty());
  EXPECT_EQ(store.result_count().value(), 1);
}

TEST_F(FarmCoreTest, AMessageNamingAnotherWorkerIsRefused) {
  const FarmEffects fx = worker("w1", pr::Ready{"w2", cpu_caps(), 1});
  const auto errors = sent<pr::Error>(fx);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].code, pr::ErrorCode::kIdentityMismatch);
  EXPECT_EQ(fx.to_workers[0].worker_id, "w1");
  EXPECT_TRUE(core->scheduler().workers().empty());
}

TEST_F(FarmCoreTest, AClientRequestOnTheWorkerSocketIsUnknownType) {
  const auto errors = sent<pr::Error>(worker("w1", pr::StatusQuery{}));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].code, pr::ErrorCode::kUnknownType);
}

TEST_F(FarmCoreTest, AnExpiredLeaseRequeuesTheJobOnATick) {
  submit(softmax_campaign());
  const pr::Job job = jobs_sent(ready("w1", 1)).at(0);
  const FarmEffects fx = tick(1'500);
  EXPECT_EQ(fx.requeued, 1);
  const JobRecord& again = core->scheduler().jobs().at(job.spec.job_id);
  EXPECT_EQ(again.attempt_reasons.size(), 1u) << "the lost lease is recorded";
  EXPECT_NE(again.state, JobState::kDone);
}

TEST_F(FarmCoreTest, AForgedPassForAJobLeasedToAnotherWorkerIsRefusedAndNeverStoredOrTuned) {
  submit(softmax_campaign());
  const pr::Job job = jobs_sent(ready("victim", 1)).at(0);
  ready("rogue", 0);
  const FarmEffects fx = result("rogue", job, 1e-6);
  const auto errors = sent<pr::Error>(fx);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].code, pr::ErrorCode::kForbidden);
  EXPECT_TRUE(sent<pr::Ack>(fx).empty());
  ASSERT_EQ(fx.refusals.size(), 1u);
  EXPECT_EQ(fx.refusals[0].reason, "not_leased");
  EXPECT_EQ(fx.refusals[0].peer, "rogue");
  EXPECT_EQ(store.result_count().value(), 0);
  EXPECT_TRUE(core->best({}).entries.empty());
  EXPECT_TRUE(store.load_best()->empty());
  // A queued job never delivered to anyone: the same.
  pr::Job queued;
  for (const auto& [id, j] : core->scheduler().jobs())
    if (j.state == JobState::kQueued) queued = {j.spec, 1, 0};
  EXPECT_EQ(sent<pr::Error>(result("rogue", queued, 1e-6)).at(0).code, pr::ErrorCode::kForbidden);
  EXPECT_EQ(store.result_count().value(), 0);
  // The holder's result is stored.
  EXPECT_EQ(sent<pr::Ack>(result("victim", job, 10.0)).size(), 1u);
  EXPECT_EQ(store.result_count().value(), 1);
}

TEST_F(FarmCoreTest, AJobWhoseLeaseWasNotStoredIsNotSent) {
  submit(softmax_campaign());
  store.set_available(false);
  const FarmEffects fx = ready("w1", 2);
  EXPECT_TRUE(jobs_sent(fx).empty()) << "a delivery the store does not know is never sent";
  EXPECT_EQ(fx.dispatched, 0);
  store.set_available(true);
  // The worker's heartbeats do not list the unsent jobs: the second releases them and they go out.
  worker("w1", pr::Heartbeat{"w1", {}});
  const FarmEffects again = worker("w1", pr::Heartbeat{"w1", {}});
  EXPECT_EQ(jobs_sent(again, "w1").size(), 2u);
}

TEST_F(FarmCoreTest, ARestartedWorkerGetsItsPredecessorsJobsBackAtOnce) {
  submit(softmax_campaign());
  const auto first = jobs_sent(ready("w1", 2));
  ASSERT_EQ(first.size(), 2u);
  const FarmEffects fx = ready("w1", 2);  // the same id, a new process
  EXPECT_EQ(fx.requeued, 2);
  for (const auto& j : first) {
    const JobRecord& rec = core->scheduler().jobs().at(j.spec.job_id);
    EXPECT_EQ(rec.state, JobState::kQueued) << "released at once, not after its lease";
    EXPECT_EQ(rec.attempt_reasons.size(), 1u);
  }
  EXPECT_EQ(jobs_sent(fx, "w1").size(), 2u) << "the new process gets work at once";
}

// ---- one worker per id (issue 21): the instance token of READY binds the id while it lives

TEST_F(FarmCoreTest, AWorkerIdHeldByALiveWorkerIsRefusedToAnotherInstanceAndTheHolderKeepsItsLeases) {
  submit(softmax_campaign());
  const auto leased = jobs_sent(worker("w1", pr::Ready{"w1", cpu_caps(), 2, "aaaa"}));
  ASSERT_EQ(leased.size(), 2u);
  const FarmEffects fx = worker("w1", pr::Ready{"w1", cpu_caps(), 2, "bbbb"});
  ASSERT_EQ(sent<pr::Error>(fx).size(), 1u);
  EXPECT_EQ(sent<pr::Error>(fx)[0].code, pr::ErrorCode::kWorkerIdInUse);
  EXPECT_EQ(sent<pr::Error>(fx)[0].instance, "bbbb") << "names the refused instance, so the holder can ignore it";
  EXPECT_NE(sent<pr::Error>(fx)[0].message.find("held by a live worker (instance aaaa)"), std::string::npos)
      << sent<pr::Error>(fx)[0].message;
  ASSERT_EQ(fx.refusals.size(), 1u);
  EXPECT_EQ(fx.refusals[0].reason, "worker_id_in_use");
  EXPECT_EQ(fx.requeued, 0);
  // Nor do its heartbeats (which list none of the holder's jobs) or its DISCONNECT release them.
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(sent<pr::Error>(worker("w1", pr::Heartbeat{"w1", {}, "bbbb"})).at(0).code, pr::ErrorCode::kWorkerIdInUse);
  EXPECT_EQ(sent<pr::Error>(worker("w1", pr::Disconnect{"w1", "stopping", "bbbb"})).at(0).code,
            pr::ErrorCode::kWorkerIdInUse);
  ASSERT_TRUE(core->scheduler().workers().count("w1"));
  for (const auto& j : leased) {
    const JobRecord& rec = core->scheduler().jobs().at(j.spec.job_id);
    EXPECT_EQ(rec.state, JobState::kLeased);
    EXPECT_EQ(rec.attempt, j.attempt);
  }
}

TEST_F(FarmCoreTest, ARestartedWorkerOfTheSameInstanceTakesItsIdBackAtOnce) {
  submit(softmax_campaign());
  ASSERT_EQ(jobs_sent(worker("w1", pr::Ready{"w1", cpu_caps(), 2, "aaaa"})).size(), 2u);
  const FarmEffects fx = worker("w1", pr::Ready{"w1", cpu_caps(), 2, "aaaa"});
  EXPECT_TRUE(sent<pr::Error>(fx).empty());
  EXPECT_EQ(fx.requeued, 2) << "its predecessor's leases end at once";
  EXPECT_EQ(jobs_sent(fx, "w1").size(), 2u);
}

TEST_F(FarmCoreTest, AWorkerIdIsFreeForAnotherInstanceOnceItsWorkerIsForgotten) {
  submit(softmax_campaign());
  ASSERT_EQ(jobs_sent(worker("w1", pr::Ready{"w1", cpu_caps(), 2, "aaaa"})).size(), 2u);
  tick(5'001);  // silent past worker_timeout_ms
  ASSERT_FALSE(core->scheduler().workers().count("w1"));
  const FarmEffects fx = worker("w1", pr::Ready{"w1", cpu_caps(), 2, "bbbb"});
  EXPECT_TRUE(sent<pr::Error>(fx).empty());
  EXPECT_EQ(jobs_sent(fx, "w1").size(), 2u);
  EXPECT_EQ(sent<pr::Error>(worker("w1", pr::Heartbeat{"w1", {}, "aaaa"})).at(0).code, pr::ErrorCode::kWorkerIdInUse)
      << "now the old instance is the other one";
}

TEST_F(FarmCoreTest, AWorkerIdIsFreeForAnotherInstanceOnceItsWorkerDisconnects) {
  worker("w1", pr::Ready{"w1", cpu_caps(), 2, "aaaa"});
  worker("w1", pr::Disconnect{"w1", "stopping", "aaaa"});
  EXPECT_TRUE(sent<pr::Error>(worker("w1", pr::Ready{"w1", cpu_caps(), 2, "bbbb"})).empty());
  EXPECT_TRUE(core->scheduler().workers().count("w1"));
}

TEST_F(FarmCoreTest, APhantomLeaseAfterACoordinatorRestartIsReleasedByTheWorkersHeartbeats) {
  submit(softmax_campaign());
  const pr::Job job = jobs_sent(ready("w1", 1)).at(0);
  core = make_core();  // the coordinator restarts; w1 had never received the job
  ready("w1", 1);
  EXPECT_TRUE(jobs_sent(worker("w1", pr::Heartbeat{"w1", {}})).empty());
  const auto sent_now = jobs_sent(worker("w1", pr::Heartbeat{"w1", {}}), "w1");
  ASSERT_EQ(sent_now.size(), 1u) << "a job now, not after ~a lease of idling";
  EXPECT_EQ(core->scheduler().jobs().at(job.spec.job_id).state, JobState::kQueued);
}

// ---- cancel

TEST_F(FarmCoreTest, CancelEndsQueuedJobsCancelledAndTellsRunningOnesToStop) {
  const std::string cid = submit(softmax_campaign()).campaign_id;
  const pr::Job running = jobs_sent(ready("w1", 1)).at(0);
  const FarmEffects fx = client(pr::Cancel{cid, "superseded"});
  const pr::CancelReply r = reply<pr::CancelReply>(fx);
  EXPECT_EQ(r.campaign_id, cid);
  EXPECT_EQ(r.cancelled, kSoftmaxJobs - 1);
  EXPECT_EQ(r.stopping, 1);
  EXPECT_EQ(r.finished, 0);
  const auto stops = sent<pr::CancelJob>(fx);
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0].job_id, running.spec.job_id);
  EXPECT_EQ(core->results({cid, "CANCELLED", "", "", ""}).rows.size(), size_t(kSoftmaxJobs - 1));
  const auto c = campaign_row(core->status(), cid);
  ASSERT_TRUE(c.has_value());
  EXPECT_TRUE(c->cancelled);
  EXPECT_EQ(c->cancel_reason, "superseded");
  EXPECT_EQ(c->cancelled_jobs, kSoftmaxJobs - 1);
  EXPECT_FALSE(c->complete) << "its running job has not ended";
  result("w1", running, 0, ResultStatus::kCancelled);
  EXPECT_TRUE(campaign_row(core->status(), cid)->complete);
}

TEST_F(FarmCoreTest, CancellingTwiceChangesNothing) {
  const std::string cid = submit(softmax_campaign()).campaign_id;
  client(pr::Cancel{cid, "first"});
  const pr::CancelReply again = reply<pr::CancelReply>(client(pr::Cancel{cid, "second"}));
  EXPECT_EQ(again.cancelled, 0);
  EXPECT_EQ(again.finished, kSoftmaxJobs);
  EXPECT_EQ(campaign_row(core->status(), cid)->cancel_reason, "first");
}

TEST_F(FarmCoreTest, CancellingAnUnknownCampaignIsABadRequest) {
  const pr::Error e = error_of(client(pr::Cancel{"nope", ""}));
  EXPECT_EQ(e.code, pr::ErrorCode::kBadRequest);
  EXPECT_NE(e.message.find("no campaign 'nope'"), std::string::npos) << e.message;
}

TEST_F(FarmCoreTest, ACancelledCampaignStaysCancelledAfterARestart) {
  const std::string cid = submit(softmax_campaign()).campaign_id;
  client(pr::Cancel{cid, "enough"});
  core = make_core();
  const auto c = campaign_row(core->status(), cid);
  ASSERT_TRUE(c.has_value());
  EXPECT_TRUE(c->cancelled);
  EXPECT_EQ(c->cancel_reason, "enough");
  EXPECT_TRUE(c->complete);
  EXPECT_TRUE(jobs_sent(ready("w1", 4)).empty()) << "nothing of it is dispatched again";
}

// ---- restart

TEST_F(FarmCoreTest, ARestartedCoreRebuildsCampaignsAndResultsFromTheStore) {
  const std::string cid = submit(softmax_campaign()).campaign_id;
  const pr::Job job = jobs_sent(ready("w1", 1)).at(0);
  result("w1", job, 11.0);
  core = make_core();
  const auto c = campaign_row(core->status(), cid);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->total, kSoftmaxJobs);
  EXPECT_EQ(c->finished, 1);
  EXPECT_EQ(c->pass, 1);
  ASSERT_TRUE(c->best.has_value());
  EXPECT_EQ(c->best->job_id, job.spec.job_id);
  ASSERT_EQ(core->results({}).rows.size(), 1u);
  EXPECT_EQ(core->results({}).rows[0].latency_us, 11.0);
}

// ---- status and results

TEST_F(FarmCoreTest, StatusCountsJobsResultsAndWorkers) {
  submit(softmax_campaign());
  const pr::Job job = jobs_sent(ready("w1", 2)).at(0);
  result("w1", job, 10.0, ResultStatus::kFail);
  const pr::StatusReply st = reply<pr::StatusReply>(client(pr::StatusQuery{}));
  EXPECT_EQ(st.jobs.queued, kSoftmaxJobs - 3);
  EXPECT_EQ(st.jobs.leased, 2);
  EXPECT_EQ(st.jobs.done, 1);
  EXPECT_EQ(st.results.at("FAIL"), 1);
  ASSERT_EQ(st.workers.size(), 1u);
  EXPECT_EQ(st.workers[0].worker_id, "w1");
  EXPECT_EQ(st.workers[0].leased.size(), 2u);
  EXPECT_EQ(st.campaigns.at(0).failed, 1);
  EXPECT_FALSE(st.campaigns.at(0).best.has_value()) << "a failure is no best";
  EXPECT_EQ(st.version, core->version());
}

TEST_F(FarmCoreTest, ResultsFilterByCampaignStatusShapeAndGpuModel) {
  const std::string a = submit(softmax_campaign("a")).campaign_id;
  const std::string b = submit(softmax_campaign("b")).campaign_id;
  const auto jobs = jobs_sent(ready("w1", 3));
  ASSERT_EQ(jobs.size(), 3u);
  result("w1", jobs[0], 10.0);
  result("w1", jobs[1], 10.0, ResultStatus::kCompileError);
  result("w1", jobs[2], 10.0);
  EXPECT_EQ(core->results({}).rows.size(), 3u);
  EXPECT_EQ(core->results({"", "PASS", "", "", ""}).rows.size(), 2u);
  EXPECT_EQ(core->results({a, "", "", "", ""}).rows.size(), 3u) << "campaign a's jobs are dispatched first";
  EXPECT_TRUE(core->results({b, "", "", "", ""}).rows.empty());
  EXPECT_EQ(core->results({"", "", "softmax", "8x64", "CPU"}).rows.size(), 3u);
  EXPECT_TRUE(core->results({"", "", "", "4096x4096", ""}).rows.empty());
  EXPECT_TRUE(core->results({"", "", "", "", "NVIDIA H200"}).rows.empty());
  const pr::ResultsReply viaclient = reply<pr::ResultsReply>(client(pr::ResultsQuery{"", "COMPILE_ERROR", "", "", ""}));
  ASSERT_EQ(viaclient.rows.size(), 1u);
  EXPECT_FALSE(viaclient.rows[0].latency_us.has_value()) << "a failed job has no figures";
}

TEST_F(FarmCoreTest, AStatusLongPollWaitsUntilTheVersionMoves) {
  const int64_t v = core->version();
  EXPECT_TRUE(client(pr::StatusQuery{v, 30'000}).to_clients.empty());
  EXPECT_EQ(core->waiting(), 1u);
  FarmEffects none;
  core->answer_waiters(&none);
  EXPECT_TRUE(none.to_clients.empty()) << "nothing changed";
  submit(softmax_campaign());
  FarmEffects fx;
  core->answer_waiters(&fx);
  ASSERT_EQ(fx.to_clients.size(), 1u);
  EXPECT_EQ(fx.to_clients[0].identity, "cli");
  EXPECT_GT(reply<pr::StatusReply>(fx).version, v);
  EXPECT_EQ(core->waiting(), 0u);
}

TEST_F(FarmCoreTest, AStatusLongPollIsAnsweredAtItsDeadline) {
  client(pr::StatusQuery{core->version(), 2'000});
  EXPECT_TRUE(tick(1'999).to_clients.empty());
  const FarmEffects fx = tick(1);
  EXPECT_EQ(reply<pr::StatusReply>(fx).version, core->version());
}

TEST_F(FarmCoreTest, AStatusQueryForAnOlderVersionIsAnsweredAtOnce) {
  submit(softmax_campaign());
  EXPECT_EQ(client(pr::StatusQuery{0, 30'000}).to_clients.size(), 1u);
  EXPECT_EQ(core->waiting(), 0u);
}

// ---- studies

json study(int64_t budget) { return testing::designed_study("designed", "random", 7, budget, "// candidate"); }

TEST_F(FarmCoreTest, AStudyCampaignProposesOneTrialPerFreeSlot) {
  ready("w1", 3);
  const pr::SubmitReply r = submit(study(10));
  EXPECT_EQ(r.studies, 1);
  EXPECT_EQ(r.jobs, 3);
  EXPECT_EQ(core->scheduler().counts().leased, 3);
  const auto c = campaign_row(core->status(), r.campaign_id);
  ASSERT_TRUE(c.has_value());
  EXPECT_TRUE(c->is_study);
  ASSERT_EQ(c->studies.size(), 1u);
  EXPECT_EQ(c->studies[0].in_flight, 3);
}

TEST_F(FarmCoreTest, AStudyWithoutWorkersProposesNothingUntilOneIsReady) {
  const pr::SubmitReply r = submit(study(10));
  EXPECT_EQ(r.jobs, 0);
  EXPECT_EQ(jobs_sent(ready("w1", 2)).size(), 2u);
}

TEST_F(FarmCoreTest, AStudyRunsItsBudgetThenIsComplete) {
  ready("w1", 2);
  const std::string cid = submit(study(5)).campaign_id;
  int results = 0;
  for (int round = 0; round < 10 && results < 5; ++round) {
    for (const auto& [id, j] : core->scheduler().jobs()) {
      if (j.state != JobState::kLeased) continue;
      pr::Job job{j.spec, j.attempt, 0};
      result("w1", job, testing::designed_cost(j.spec.config));
      ++results;
      break;  // the map changes under a result; look again
    }
  }
  EXPECT_EQ(results, 5);
  const auto c = campaign_row(core->status(), cid);
  ASSERT_TRUE(c.has_value());
  EXPECT_TRUE(c->complete);
  EXPECT_EQ(c->total, 5);
  ASSERT_TRUE(c->studies.at(0).best.has_value());
  EXPECT_TRUE(c->studies.at(0).done);
  EXPECT_EQ(core->scheduler().counts().leased, 0) << "nothing proposed past the budget";
}

TEST_F(FarmCoreTest, ACancelledStudyProposesNothingMore) {
  ready("w1", 2);
  const std::string cid = submit(study(10)).campaign_id;
  const pr::CancelReply r = reply<pr::CancelReply>(client(pr::Cancel{cid, "enough"}));
  EXPECT_EQ(r.stopping, 2);
  for (const auto& [id, j] : std::map<std::string, JobRecord>(core->scheduler().jobs()))
    result("w1", pr::Job{j.spec, j.attempt, 0}, 0, ResultStatus::kCancelled);
  EXPECT_EQ(core->scheduler().jobs().size(), 2u) << "no proposal after the cancel";
  EXPECT_TRUE(campaign_row(core->status(), cid)->complete);
}

// ---- tuning database

TEST_F(FarmCoreTest, APassingResultBecomesTheBestEntryUntilAFasterOneComes) {
  submit(softmax_campaign());
  const auto jobs = jobs_sent(ready("w1", 1));
  result("w1", jobs.at(0), 10.0);
  pr::BestReply best = reply<pr::BestReply>(client(pr::BestQuery{}));
  ASSERT_EQ(best.entries.size(), 1u);
  EXPECT_EQ(best.entries[0].job_id, jobs[0].spec.job_id);
  EXPECT_EQ(best.format, 1);
  // Every job of the campaign has the same key (kernel, backend, GPU model, dtype, shape).
  std::vector<pr::Job> next;
  for (const auto& [id, j] : core->scheduler().jobs())
    if (j.state == JobState::kLeased) next.push_back({j.spec, j.attempt, 0});
  ASSERT_EQ(next.size(), 1u);
  result("w1", next[0], 12.0);
  EXPECT_EQ(core->best({}).entries.at(0).job_id, jobs[0].spec.job_id) << "a slower result changes nothing";
  next.clear();
  for (const auto& [id, j] : core->scheduler().jobs())
    if (j.state == JobState::kLeased) next.push_back({j.spec, j.attempt, 0});
  result("w1", next.at(0), 8.0);
  best = core->best({});
  ASSERT_EQ(best.entries.size(), 1u);
  EXPECT_EQ(best.entries[0].job_id, next[0].spec.job_id);
  EXPECT_DOUBLE_EQ(best.entries[0].m.latency_us, 8.0);
  EXPECT_EQ(store.load_best()->size(), 1u);
}

TEST_F(FarmCoreTest, BestAnswersOnlyTheEntriesItsQueryMatches) {
  submit(softmax_campaign());
  result("w1", jobs_sent(ready("w1", 1)).at(0), 10.0);
  EXPECT_EQ(core->best({"softmax", "cpu", "CPU", "fp32", "8x64"}).entries.size(), 1u);
  EXPECT_TRUE(core->best({"matmul", "", "", "", ""}).entries.empty());
  EXPECT_TRUE(core->best({"", "", "", "bf16", ""}).entries.empty());
}

TEST_F(FarmCoreTest, ImportStoresNewEntriesAndKeepsFasterOnes) {
  submit(softmax_campaign());
  result("w1", jobs_sent(ready("w1", 1)).at(0), 10.0);
  json doc = json(core->best({}));
  doc["entries"][0]["latency_us"] = 20.0;  // slower than ours: kept out
  TunedEntry other = doc["entries"][0].get<TunedEntry>();
  other.shape = {16, 64};
  other.m.latency_us = 5.0;
  doc["entries"].push_back(other);
  const pr::ImportBestReply r = reply<pr::ImportBestReply>(client(pr::ImportBest{doc}));
  EXPECT_EQ(r.entries, 2);
  EXPECT_EQ(r.stored, 1);
  EXPECT_EQ(r.kept, 1);
  const pr::BestReply best = core->best({});
  ASSERT_EQ(best.entries.size(), 2u);
  EXPECT_DOUBLE_EQ(best.entries[1].m.latency_us, 10.0) << "the farm's own 8x64 entry stays (16x64 sorts first)";
  const pr::ImportBestReply again = reply<pr::ImportBestReply>(client(pr::ImportBest{doc}));
  EXPECT_EQ(again.stored, 0);
  EXPECT_EQ(again.kept, 2);
}

TEST_F(FarmCoreTest, ImportingADocumentOfAnotherFormatIsABadRequest) {
  const pr::Error e = error_of(client(pr::ImportBest{json{{"format", 2}}}));
  EXPECT_EQ(e.code, pr::ErrorCode::kBadRequest);
  EXPECT_NE(e.message.find("format"), std::string::npos) << e.message;
}

TEST_F(FarmCoreTest, ARestartedCoreServesTheSameTuningDatabase) {
  submit(softmax_campaign());
  result("w1", jobs_sent(ready("w1", 1)).at(0), 10.0);
  const json before = json(core->best({}).entries);
  core = make_core();
  EXPECT_EQ(json(core->best({}).entries), before);
}

// ---- authorisation (issue 19): clients with keys and roles

const ClientPeer kAlice{"alice-key", ClientRole::kSubmit};
const ClientPeer kMallory{"mallory-key", ClientRole::kSubmit};
const ClientPeer kAdmin{"admin-key", ClientRole::kAdmin};

TEST_F(FarmCoreTest, ACampaignSubmittedWithAKeyIsOwnedByItAcrossARestart) {
  FarmEffects fx;
  core->on_client("cli", pr::Submit{softmax_campaign()}, &fx, kAlice);
  const std::string cid = reply<pr::SubmitReply>(fx).campaign_id;
  core = make_core();
  FarmEffects cancel;
  core->on_client("cli", pr::Cancel{cid, "by a stranger"}, &cancel, kMallory);
  EXPECT_EQ(error_of(cancel).code, pr::ErrorCode::kForbidden) << "the owner survives the restart";
  auto stored = store.load();
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->campaigns.size(), 1u);
  EXPECT_EQ(stored->campaigns[0].owner, "alice-key");
}

TEST_F(FarmCoreTest, AClientCannotCancelAnotherClientsCampaign) {
  FarmEffects fx;
  core->on_client("alice", pr::Submit{softmax_campaign()}, &fx, kAlice);
  const std::string cid = reply<pr::SubmitReply>(fx).campaign_id;
  FarmEffects cancel;
  core->on_client("mallory", pr::Cancel{cid, "mine now"}, &cancel, kMallory);
  const pr::Error e = error_of(cancel);
  EXPECT_EQ(e.code, pr::ErrorCode::kForbidden);
  EXPECT_NE(e.message.find("another client"), std::string::npos) << e.message;
  ASSERT_EQ(cancel.refusals.size(), 1u);
  EXPECT_EQ(cancel.refusals[0].reason, "not_owner");
  EXPECT_EQ(cancel.refusals[0].peer, "mallory-key");
  EXPECT_FALSE(campaign_row(core->status(), cid)->cancelled);
  EXPECT_FALSE(store.load()->campaigns.at(0).cancelled);
  EXPECT_EQ(core->scheduler().counts().queued, kSoftmaxJobs);
}

TEST_F(FarmCoreTest, AClientCancelsItsOwnCampaignAndAnAdminAnyone) {
  FarmEffects a, b;
  core->on_client("alice", pr::Submit{softmax_campaign("a")}, &a, kAlice);
  core->on_client("alice", pr::Submit{softmax_campaign("b")}, &b, kAlice);
  const std::string first = reply<pr::SubmitReply>(a).campaign_id;
  const std::string second = reply<pr::SubmitReply>(b).campaign_id;
  FarmEffects own, admin;
  core->on_client("alice", pr::Cancel{first, ""}, &own, kAlice);
  EXPECT_EQ(reply<pr::CancelReply>(own).cancelled, kSoftmaxJobs);
  core->on_client("root", pr::Cancel{second, ""}, &admin, kAdmin);
  EXPECT_EQ(reply<pr::CancelReply>(admin).cancelled, kSoftmaxJobs);
}

TEST_F(FarmCoreTest, ImportNeedsTheAdminRoleWhenClientsHaveKeys) {
  submit(softmax_campaign());
  result("w1", jobs_sent(ready("w1", 1)).at(0), 10.0);
  json doc = json(core->best({}));
  doc["entries"][0]["latency_us"] = 5.0;
  FarmEffects fx;
  core->on_client("cli", pr::ImportBest{doc}, &fx, kAlice);
  EXPECT_EQ(error_of(fx).code, pr::ErrorCode::kForbidden);
  ASSERT_EQ(fx.refusals.size(), 1u);
  EXPECT_EQ(fx.refusals[0].reason, "not_admin");
  EXPECT_DOUBLE_EQ(core->best({}).entries.at(0).m.latency_us, 10.0);
  FarmEffects ok;
  core->on_client("cli", pr::ImportBest{doc}, &ok, kAdmin);
  EXPECT_EQ(reply<pr::ImportBestReply>(ok).stored, 1);
  EXPECT_DOUBLE_EQ(core->best({}).entries.at(0).m.latency_us, 5.0);
}

TEST_F(FarmCoreTest, AnImportOutsideTheSearchSpaceOrWithAnImpossibleLatencyIsRefusedWhole) {
  submit(softmax_campaign());
  result("w1", jobs_sent(ready("w1", 1)).at(0), 10.0);
  const json good = json(core->best({}))["entries"][0];
  auto doc_with = [&](const std::function<void(json&)>& change) {
    json e = good;
    e["shape"] = {16, 64};  // a key the farm has no entry for
    change(e);
    json other = good;
    other["shape"] = {32, 64};  // a good entry beside it: refused with it
    return json{{"format", 1}, {"entries", {other, e}}};
  };
  const std::vector<std::pair<std::string, std::function<void(json&)>>> bad = {
      {"unknown tunable", [](json& e) { e["config"]["AK_EVIL"] = 1; }},
      {"value outside the space", [](json& e) { e["config"][e["config"].begin().key()] = 3; }},
      {"1e-6 us", [](json& e) { e["latency_us"] = 1e-6; }},
      {"NaN", [](json& e) { e["latency_us"] = std::nan(""); }},
      {"infinite", [](json& e) { e["latency_us"] = std::numeric_limits<double>::infinity(); }},
      {"negative", [](json& e) { e["latency_us"] = -3.0; }},
      {"unknown kernel type", [](json& e) { e["kernel_type"] = "rootkit"; }},
      {"a shape the type rejects", [](json& e) { e["shape"] = {8}; }},
      {"infinite speedup", [](json& e) { e["speedup"] = std::numeric_limits<double>::infinity(); }},
  };
  for (const auto& [what, change] : bad) {
    const FarmEffects fx = client(pr::ImportBest{doc_with(change)});
    ASSERT_EQ(fx.to_clients.size(), 1u) << what;
    const auto* e = std::get_if<pr::Error>(&fx.to_clients[0].message);
    ASSERT_NE(e, nullptr) << what << " was imported";
    EXPECT_EQ(e->code, pr::ErrorCode::kBadRequest) << what;
    EXPECT_EQ(core->best({}).entries.size(), 1u) << what << ": nothing of the document is stored";
  }
  EXPECT_EQ(store.load_best()->size(), 1u);
  const pr::ImportBestReply ok = reply<pr::ImportBestReply>(client(pr::ImportBest{doc_with([](json&) {})}));
  EXPECT_EQ(ok.stored, 2) << "the same document without the bad field is taken";
}

TEST_F(FarmCoreTest, AnImportedCustomCandidateMayNameTheTunablesItsSourceUses) {
  submit(softmax_campaign());
  result("w1", jobs_sent(ready("w1", 1)).at(0), 10.0);
  json e = json(core->best({}))["entries"][0];
  e["shape"] = {16, 64};
  e["source"] = "#define TILE AK_TILE\nextern \"C\" void softmax() {}\n";
  e["config"] = {{"AK_TILE", 7}};
  const pr::ImportBestReply ok = reply<pr::ImportBestReply>(client(pr::ImportBest{{{"format", 1}, {"entries", {e}}}}));
  EXPECT_EQ(ok.stored, 1);
  e["shape"] = {32, 64};
  e["config"] = {{"AK_TILE", 7}, {"AK_TIL", 1}};  // a prefix of a word is not the word
  EXPECT_EQ(error_of(client(pr::ImportBest{{{"format", 1}, {"entries", {e}}}})).code, pr::ErrorCode::kBadRequest);
}

// ---- workers with keys

TEST_F(FarmCoreTest, AWorkerIdRegisteredUnderOneKeyIsRefusedToAnother) {
  submit(softmax_campaign());
  FarmEffects first;
  core->on_worker("w1", pr::Ready{"w1", cpu_caps(), 1}, &first, "key-1");
  const pr::Job job = jobs_sent(first).at(0);
  FarmEffects other;
  core->on_worker("w1", pr::Ready{"w1", cpu_caps(), 4}, &other, "key-2");
  ASSERT_EQ(sent<pr::Error>(other).size(), 1u);
  EXPECT_EQ(sent<pr::Error>(other)[0].code, pr::ErrorCode::kForbidden);
  ASSERT_EQ(other.refusals.size(), 1u);
  EXPECT_EQ(other.refusals[0].reason, "key_mismatch");
  EXPECT_EQ(core->scheduler().jobs().at(job.spec.job_id).worker_id, "w1") << "the lease stays";
  EXPECT_EQ(core->scheduler().workers().at("w1").slots, 1);
  // Nor may the other key report w1's job.
  ResultRecord r;
  r.job_id = job.spec.job_id;
  r.attempt = job.attempt;
  FarmEffects forged;
  core->on_worker("w1", pr::ResultMsg{"w1", r}, &forged, "key-2");
  EXPECT_EQ(sent<pr::Error>(forged).at(0).code, pr::ErrorCode::kForbidden);
  EXPECT_EQ(store.result_count().value(), 0);
}

}  // namespace
}  // namespace ak
