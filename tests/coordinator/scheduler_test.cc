// Behaviour of the scheduler state machine (coordinator/scheduler.h), one event sequence per test.
#include "coordinator/scheduler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "tests/coordinator/scheduler_harness.h"

namespace ak {
namespace {

using testing::cpu_caps;
using testing::gpu_caps;
using testing::make_job;
using testing::only;
using testing::SchedulerHarness;
using testing::sent_ids;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

using Ids = std::vector<std::string>;

// ---- submit

TEST(SchedulerTest, SubmitPersistsEveryJobAsQueued) {
  SchedulerHarness h;
  auto a = h.submit({make_job("a"), make_job("b")});
  auto persisted = only<PersistJob>(a);
  ASSERT_EQ(persisted.size(), 2u);
  EXPECT_EQ(persisted[0].job.spec.job_id, "a");
  EXPECT_EQ(persisted[0].job.state, JobState::kQueued);
  EXPECT_EQ(persisted[1].job.spec.job_id, "b");
  EXPECT_TRUE(only<SendJob>(a).empty());
  EXPECT_EQ(h.sched.counts().queued, 2);
  EXPECT_FALSE(h.sched.all_finished());
}

TEST(SchedulerTest, SubmitOfAKnownJobIdIsRejectedAndAddsNothing) {
  SchedulerHarness h;
  h.submit({make_job("a")});
  auto r = h.sched.submit({make_job("b"), make_job("a")}, h.now);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(r.status().message().find("a"), std::string::npos);
  EXPECT_EQ(h.sched.jobs().size(), 1u);
  EXPECT_TRUE(h.sched.check_invariants(h.now).ok());
}

TEST(SchedulerTest, SubmitOfABatchRepeatingAnIdIsRejectedAndAddsNothing) {
  SchedulerHarness h;
  auto r = h.sched.submit({make_job("x"), make_job("x")}, h.now);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(h.sched.jobs().empty());
}

TEST(SchedulerTest, SubmitDispatchesToAWorkerWithFreeSlots) {
  SchedulerHarness h;
  h.ready("w1", 1);
  auto a = h.submit({make_job("a")});
  EXPECT_EQ(sent_ids(a, "w1"), Ids{"a"});
}

// ---- dispatch

TEST(SchedulerTest, QueuedJobsAreDispatchedInSubmissionOrder) {
  SchedulerHarness h;
  h.submit({make_job("j1"), make_job("j2"), make_job("j3"), make_job("j4")});
  auto a = h.ready("w1", 3);
  EXPECT_EQ(sent_ids(a), (Ids{"j1", "j2", "j3"}));
}

TEST(SchedulerTest, DispatchPersistsTheLeaseBeforeSendingTheJob) {
  SchedulerHarness h;
  h.submit({make_job("a")});
  auto a = h.ready("w1", 1);
  ASSERT_EQ(a.size(), 2u);
  const auto* p = std::get_if<PersistJob>(&a[0]);
  const auto* s = std::get_if<SendJob>(&a[1]);
  ASSERT_TRUE(p && s);
  EXPECT_EQ(p->job.state, JobState::kLeased);
  EXPECT_EQ(p->job.attempt, 1);
  EXPECT_EQ(p->job.worker_id, "w1");
  EXPECT_EQ(p->job.lease_expires_ms, h.now + 1'000);
  EXPECT_EQ(s->worker_id, "w1");
  EXPECT_EQ(s->job.attempt, 1);
  EXPECT_EQ(s->job.lease_ms, 1'000);
  EXPECT_EQ(s->job.spec.job_id, "a");
}

TEST(SchedulerTest, AWorkerNeverHoldsMoreLeasesThanItsSlots) {
  SchedulerHarness h;
  h.submit({make_job("a"), make_job("b"), make_job("c")});
  auto a = h.ready("w1", 2);
  EXPECT_EQ(sent_ids(a).size(), 2u);
  EXPECT_TRUE(sent_ids(h.heartbeat("w1")).empty());
  EXPECT_EQ(h.sched.workers().at("w1").leased.size(), 2u);
  EXPECT_EQ(h.sched.counts().queued, 1);
}

TEST(SchedulerTest, ACommittedResultFreesTheSlotForTheNextJob) {
  SchedulerHarness h;
  h.submit({make_job("a"), make_job("b")});
  h.ready("w1", 1);
  auto r = h.result("w1", "a", 1);
  EXPECT_TRUE(sent_ids(r).empty()) << "the slot is freed only once the result is stored";
  auto c = h.commit("a");
  EXPECT_EQ(sent_ids(c, "w1"), Ids{"b"});
}

TEST(SchedulerTest, WorkSpreadsAcrossEquallyFreeWorkers) {
  SchedulerHarness h;
  h.ready("w1", 4);
  h.ready("w2", 4);
  auto a = h.submit({make_job("a"), make_job("b"), make_job("c"), make_job("d")});
  EXPECT_EQ(sent_ids(a, "w1").size(), 2u);
  EXPECT_EQ(sent_ids(a, "w2").size(), 2u);
}

TEST(SchedulerTest, SingleJobsTakeTurnsAcrossWorkers) {
  SchedulerHarness h;
  h.ready("w1", 4);
  h.ready("w2", 4);
  h.ready("w3", 4);
  Ids to;
  for (const char* id : {"a", "b", "c"}) {
    auto a = h.submit({make_job(id)});
    ASSERT_EQ(only<SendJob>(a).size(), 1u);
    to.push_back(only<SendJob>(a)[0].worker_id);
    h.result_committed(to.back(), id, 1);
  }
  EXPECT_EQ(to, (Ids{"w1", "w2", "w3"}));
}

// ---- capability matching

TEST(SchedulerTest, AJobWhoseBackendNoWorkerHasWaitsWhileLaterJobsProceed) {
  SchedulerHarness h;
  h.submit({make_job("cuda1", Backend::kCuda), make_job("cpu1"), make_job("cpu2")});
  auto a = h.ready("cpu-worker", 3, cpu_caps());
  EXPECT_EQ(sent_ids(a), (Ids{"cpu1", "cpu2"}));
  EXPECT_EQ(h.job("cuda1").state, JobState::kQueued);
  auto g = h.ready("gpu-worker", 1, gpu_caps("NVIDIA H200", "sm_90a"));
  EXPECT_EQ(sent_ids(g, "gpu-worker"), Ids{"cuda1"});
}

TEST(SchedulerTest, GpuModelIsComparedCaseInsensitively) {
  SchedulerHarness h;
  h.submit({make_job("a", Backend::kCuda, "nvidia h200")});
  auto a = h.ready("w1", 1, gpu_caps("NVIDIA H200", "sm_90a"));
  EXPECT_EQ(sent_ids(a), Ids{"a"});
}

TEST(SchedulerTest, AJobForAnotherGpuModelIsNotSent) {
  SchedulerHarness h;
  h.submit({make_job("a100-job", Backend::kCuda, "NVIDIA A100"),
            make_job("any-gpu", Backend::kCuda)});
  auto a = h.ready("h200", 2, gpu_caps("NVIDIA H200", "sm_90a"));
  EXPECT_EQ(sent_ids(a), Ids{"any-gpu"});
  auto b = h.ready("a100", 1, gpu_caps("NVIDIA A100-SXM4-80GB", "sm_80"));
  EXPECT_TRUE(sent_ids(b).empty()) << "the model name must match exactly, ignoring case";
}

TEST(SchedulerTest, ArchMustMatchExactly) {
  SchedulerHarness h;
  h.submit({make_job("hopper", Backend::kCuda, "", "sm_90a")});
  EXPECT_TRUE(sent_ids(h.ready("ampere", 1, gpu_caps("NVIDIA A100", "sm_80"))).empty());
  EXPECT_TRUE(sent_ids(h.ready("plain90", 1, gpu_caps("NVIDIA H100", "sm_90"))).empty());
  EXPECT_EQ(sent_ids(h.ready("h200", 1, gpu_caps("NVIDIA H200", "sm_90a"))), Ids{"hopper"});
}

TEST(SchedulerTest, UnrunnableCountsQueuedJobsByWhatNoConnectedWorkerOffers) {
  SchedulerHarness h;
  h.submit({make_job("cuda1", Backend::kCuda), make_job("cuda2", Backend::kCuda),
            make_job("a100", Backend::kCuda, "NVIDIA A100"), make_job("hopper", Backend::kCuda, "", "sm_90a"),
            make_job("cpu1")});
  using Need = std::map<std::string, int64_t>;
  EXPECT_EQ(h.sched.stranded().by_need, (Need{{"backend cpu", 1}, {"backend cuda", 4}})) << "no worker at all";
  h.ready("cpu-worker", 1, cpu_caps());
  EXPECT_EQ(h.sched.stranded().by_need, (Need{{"backend cuda", 4}})) << "the cpu job was dispatched";
  h.ready("ampere", 1, gpu_caps("NVIDIA H100", "sm_80"));
  EXPECT_EQ(h.job("cuda2").state, JobState::kQueued);
  EXPECT_EQ(h.sched.stranded().by_need, (Need{{"arch sm_90a", 1}, {"gpu_model NVIDIA A100", 1}}))
      << "cuda2 waits for a free slot, not for a worker that can run it";
}

// The same count by campaign: what `autokernel run` reads of the campaign it follows.
TEST(SchedulerTest, UnrunnableByCampaignCountsEachCampaignsOwnStrandedJobs) {
  SchedulerHarness h;
  auto in = [](JobSpec j, const std::string& campaign) {
    j.campaign_id = campaign;
    return j;
  };
  h.submit({in(make_job("h200-1", Backend::kCuda, "NVIDIA H200"), "wants-h200"),
            in(make_job("h200-2", Backend::kCuda, "NVIDIA H200"), "wants-h200"), in(make_job("cpu1"), "plain"),
            in(make_job("cpu2"), "plain")});
  using Count = std::map<std::string, int64_t>;
  EXPECT_EQ(h.sched.stranded().by_campaign, (Count{{"plain", 2}, {"wants-h200", 2}})) << "no worker at all";
  h.ready("h100", 1, gpu_caps("NVIDIA H100 80GB HBM3", "sm_90a"));
  // The H100 took one cpu job; the other waits for a slot, which is not being stranded.
  EXPECT_EQ(h.sched.stranded().by_campaign, (Count{{"wants-h200", 2}}));
  EXPECT_EQ(h.sched.stranded().by_need, (Count{{"gpu_model NVIDIA H200", 2}})) << "the same jobs, by what they need";
  h.ready("h200", 2, gpu_caps("NVIDIA H200", "sm_90a"));
  EXPECT_TRUE(h.sched.stranded().by_campaign.empty());
}

TEST(SchedulerTest, ACudaWorkerAlsoTakesCpuJobsItAnnounces) {
  SchedulerHarness h;
  h.submit({make_job("cpu-job")});
  EXPECT_EQ(sent_ids(h.ready("g", 1, gpu_caps("NVIDIA H200", "sm_90a"))), Ids{"cpu-job"});
}

// ---- ready

TEST(SchedulerTest, ReadyFromARegisteredWorkerReleasesItsPredecessorsLeasesAtOnce) {
  // A worker sends READY when it starts: READY under a registered id is a restarted worker, which
  // holds nothing of what its predecessor held.
  SchedulerHarness h;
  h.submit({make_job("a")});
  h.ready("w1", 2);
  ASSERT_EQ(h.job("a").attempt, 1);
  auto a = h.ready("w1", 2);
  EXPECT_THAT(h.job("a").attempt_reasons, ElementsAre("worker w1 registered again (restarted)"));
  EXPECT_EQ(sent_ids(a, "w1"), Ids{"a"}) << "delivered again at once, not after the lease";
  EXPECT_EQ(h.job("a").attempt, 2);
  EXPECT_EQ(h.sched.workers().at("w1").leased.size(), 1u);
}

// ---- heartbeats and leases

TEST(SchedulerTest, HeartbeatFromAnUnknownWorkerAsksItToSendReady) {
  SchedulerHarness h;
  auto a = h.heartbeat("ghost");
  auto e = only<SendError>(a);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].worker_id, "ghost");
  EXPECT_EQ(e[0].error.code, protocol::ErrorCode::kUnknownWorker);
  EXPECT_EQ(e[0].error.message,
            "worker ghost is not registered with this coordinator; send READY");
}

TEST(SchedulerTest, HeartbeatListingAJobRenewsItsLease) {
  SchedulerHarness h;
  h.submit({make_job("a")});
  h.ready("w1", 1);
  h.tick(900);
  h.heartbeat("w1", {{"a", 1}});
  EXPECT_EQ(h.job("a").lease_expires_ms, h.now + 1'000);
  h.tick(900);  // 1800 ms after dispatch: past the first lease, inside the renewed one
  EXPECT_EQ(h.job("a").state, JobState::kLeased);
  EXPECT_EQ(h.job("a").attempt, 1);
}

TEST(SchedulerTest, HeartbeatListingAnOldAttemptDoesNotRenewTheLease) {
  SchedulerHarness h;
  h.submit({make_job("a")});
  h.ready("w1", 1);
  const int64_t expiry = h.job("a").lease_expires_ms;
  h.tick(500);
  h.heartbeat("w1", {{"a", 7}, {"unknown-job", 1}});
  EXPECT_EQ(h.job("a").lease_expires_ms, expiry);
}

TEST(SchedulerTest, HeartbeatFromAnotherWorkerDoesNotRenewTheLease) {
  SchedulerHarness h;
  h.submit({make_job("a")});
  h.ready("w1", 1);
  h.ready("w2", 1);
  const int64_t expiry = h.job("a").lease_expires_ms;
  h.tick(500);
  h.heartbeat("w2", {{"a", 1}});
  EXPECT_EQ(h.job("a").lease_expires_ms, expiry);
}

TEST(SchedulerTest, TheSecondHeartbeatThatDoesNotListALeasedJobReleasesIt) {
  SchedulerHarness h;
  h.ready("w1", 1);
  h.ready("w2", 1);
  h.submit({make_job("a")});
  const std::string holder = h.job("a").worker_id;
  const std::string other = holder == "w1" ? "w2" : "w1";
  // The first may have left the worker before the JOB reached it.
  EXPECT_TRUE(only<PersistJob>(h.heartbeat(holder)).empty());
  EXPECT_EQ(h.job("a").state, JobState::kLeased);
  auto a = h.heartbeat(holder);
  EXPECT_THAT(h.job("a").attempt_reasons,
              ElementsAre("worker " + holder + " no longer lists job a attempt 1 in its heartbeats"));
  EXPECT_EQ(sent_ids(a, other), Ids{"a"}) << "requeued and delivered at once, not after the lease";
  EXPECT_EQ(h.job("a").attempt, 2);
}

TEST(SchedulerTest, AHeartbeatListingTheJobAgainResetsTheCount) {
  SchedulerHarness h;
  h.ready("w1", 1);
  h.submit({make_job("a")});
  h.heartbeat("w1");
  h.heartbeat("w1", {{"a", 1}});
  h.heartbeat("w1");
  EXPECT_EQ(h.job("a").state, JobState::kLeased);
  EXPECT_EQ(h.job("a").attempt, 1);
}

TEST(SchedulerTest, AHeartbeatListingAnotherAttemptDoesNotKeepTheLease) {
  SchedulerHarness h;
  h.ready("w1", 1);
  h.submit({make_job("a")});
  h.heartbeat("w1", {{"a", 7}});
  h.heartbeat("w1", {{"a", 7}});
  EXPECT_EQ(h.job("a").attempt, 2) << "released and delivered again";
}

TEST(SchedulerTest, AnExpiredLeaseRequeuesTheJobAndTheNextDeliveryCarriesTheNextAttempt) {
  SchedulerHarness h;
  h.submit({make_job("a")});
  h.ready("w1", 1);
  h.tick(600);
  h.heartbeat("w1");  // alive, but no longer lists the job
  auto t = h.tick(400);
  auto p = only<PersistJob>(t);
  ASSERT_FALSE(p.empty());
  EXPECT_EQ(p[0].job.state, JobState::kQueued);
  EXPECT_EQ(p[0].job.attempt, 1);
  EXPECT_THAT(p[0].job.attempt_reasons, ElementsAre("lease expired on worker w1 at attempt 1"));
  // The tick dispatches again into the slot the expiry freed.
  auto s = only<SendJob>(t);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].job.attempt, 2);
  EXPECT_EQ(h.job("a").attempt, 2);
}

TEST(SchedulerTest, ALeaseIsKeptUntilItsExpiryTime) {
  SchedulerHarness h;
  h.submit({make_job("a")});
  h.ready("w1", 1);
  h.tick(999);
  EXPECT_EQ(h.job("a").state, JobState::kLeased);
  EXPECT_EQ(h.job("a").attempt, 1);
}

TEST(SchedulerTest, AfterTheAttemptLimitTheJobEndsLostWithEveryAttemptsReason) {
  SchedulerHarness h;
  h.submit({make_job("a")});
  h.ready("w1", 1);
  h.tick(1'000);  // attempt 1 expires, attempt 2 sent
  h.heartbeat("w1");
  h.tick(1'000);  // attempt 2 expires, attempt 3 sent
  h.heartbeat("w1");
  auto t = h.tick(1'000);  // attempt 3 expires: LOST
  auto pr = only<PersistResult>(t);
  ASSERT_EQ(pr.size(), 1u);
  EXPECT_TRUE(only<SendJob>(t).empty());
  EXPECT_EQ(pr[0].result.job_id, "a");
  EXPECT_EQ(pr[0].result.status, ResultStatus::kLost);
  EXPECT_EQ(pr[0].result.stage, "lease");
  EXPECT_EQ(pr[0].result.reason, "gave up after 3 attempts");
  EXPECT_EQ(pr[0].result.attempt, 3);
  EXPECT_THAT(pr[0].result.attempt_reasons,
              ElementsAre("lease expired on worker w1 at attempt 1",
                          "lease expired on worker w1 at attempt 2",
                          "lease expired on worker w1 at attempt 3"));
  EXPECT_EQ(pr[0].job.state, JobState::kLost);
  EXPECT_TRUE(pr[0].job.worker_id.empty());
  EXPECT_EQ(h.job("a").state, JobState::kLost);
  EXPECT_FALSE(h.sched.all_finished()) << "the LOST row is not stored yet";
  h.commit("a");
  EXPECT_EQ(h.sched.counts().by_status.at(ResultStatus::kLost), 1);
  EXPECT_EQ(h.sched.counts().lost, 1);
  EXPECT_TRUE(h.sched.all_finished());
}

TEST(SchedulerTest, AnUnstoredLostRowIsWrittenAgainOnTheNextTick) {
  SchedulerHarness h({.lease_ms = 1'000, .worker_timeout_ms = 5'000, .max_attempts = 1});
  h.submit({make_job("a")});
  h.ready("w1", 1);
  ASSERT_EQ(only<PersistResult>(h.tick(1'000)).size(), 1u);
  // The store was down: no commit.
  h.heartbeat("w1");
  auto again = only<PersistResult>(h.tick(100));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].result.status, ResultStatus::kLost);
  h.commit("a");
  EXPECT_TRUE(only<PersistResult>(h.tick(100)).empty());
}

// ---- results

TEST(SchedulerTest, AResultIsPersistedThenAcknowledged) {
  SchedulerHarness h;
  h.submit({make_job("a")});
  h.ready("w1", 1);
  auto a = h.result("w1", "a", 1);
  ASSERT_EQ(a.size(), 2u);
  const auto* p = std::get_if<PersistResult>(&a[0]);
  const auto* ack = std::get_if<SendAck>(&a[1]);
  ASSERT_TRUE(p && ack);
  EXPECT_EQ(p->result.job_id, "a");
  EXPECT_EQ(p->result.status, ResultStatus::kPass);
  EXPECT_EQ(p->job.state, JobState::kDone);
  EXPECT_TRUE(p->job.worker_id.empty());
  EXPECT_EQ(p->job.lease_expires_ms, 0);
  EXPECT_EQ(ack->worker_id, "w1");
  EXPECT_EQ(ack->ack.job_id, "a");
  EXPECT_EQ(ack->ack.attempt, 1);
}

TEST(SchedulerTest, AResultChangesStateOnlyWhenCommitted) {
  SchedulerHarness h;
  h.submit({make_job("a")});
  h.ready("w1", 1);
  h.result("w1", "a", 1, ResultStatus::kFail);
  EXPECT_EQ(h.job("a").state, JobState::kLeased);
  EXPECT_TRUE(h.sched.counts().by_status.empty());
  h.commit("a");
  EXPECT_EQ(h.job("a").state, JobState::kDone);
  EXPECT_TRUE(h.sched.workers().at("w1").leased.empty());
  EXPECT_EQ(h.sched.counts().by_status.at(ResultStatus::kFail), 1);
  EXPECT_EQ(h.sched.counts().done, 1);
  EXPECT_TRUE(h.sched.all_finished());
}

TEST(SchedulerTest, ADuplicateResultIsOnlyAcknowledged) {
  SchedulerHarness h;
  h.submit({make_job("a")});
  h.ready("w1", 1);
  h.result_committed("w1", "a", 1);
  auto a = h.result("w1", "a", 1);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_TRUE(std::holds_alternative<SendAck>(a[0]));
  EXPECT_EQ(std::get<SendAck>(a[0]).ack.attempt, 1);
  EXPECT_TRUE(h.commit("a").empty());
  EXPECT_EQ(h.sched.counts().by_status.at(ResultStatus::kPass), 1);
}

TEST(SchedulerTest, AnUncommittedResultIsPersistedAgainWhenResent) {
  SchedulerHarness h;
  h.submit({make_job("a")});
  h.ready("w1", 1);
  h.result("w1", "a", 1);  // the store write failed: no commit, no ack sent
  auto again = h.result("w1", "a", 1);
  ASSERT_EQ(again.size(), 2u);
  EXPECT_TRUE(std::holds_alternative<PersistResult>(again[0]));
  EXPECT_TRUE(std::holds_alternative<SendAck>(again[1]));
  h.commit("a");
  EXPECT_EQ(h.job("a").state, JobState::kDone);
  EXPECT_EQ(h.sched.counts().by_status.at(ResultStatus::kPass), 1);
}

TEST(SchedulerTest, ALateResultOfASupersededAttemptIsAcknowledgedButNotStored) {
  SchedulerHarness h;
  h.submit({make_job("a")});
  h.ready("w1", 1);
  h.ready("w2", 1);  // w1 got attempt 1
  ASSERT_EQ(h.job("a").worker_id, "w1");
  h.heartbeat("w2");
  h.tick(1'000);  // w1 missed its renewal; attempt 2 goes to w2
  ASSERT_EQ(h.job("a").worker_id, "w2");
  ASSERT_EQ(h.job("a").attempt, 2);

  ResultRefusal why = ResultRefusal::kNone;
  ResultRecord late;
  late.job_id = "a";
  late.attempt = 1;
  late.status = ResultStatus::kTimeout;
  auto a = h.checked(h.sched.on_result({"w1", late}, h.now, &why));
  ASSERT_EQ(a.size(), 1u) << "only an ACK, so that w1 drops it";
  EXPECT_EQ(std::get<SendAck>(a[0]).ack.attempt, 1);
  EXPECT_EQ(why, ResultRefusal::kStaleAttempt);
  EXPECT_EQ(h.job("a").state, JobState::kLeased);
  EXPECT_EQ(h.job("a").worker_id, "w2");

  auto second = h.result_committed("w2", "a", 2);
  EXPECT_EQ(only<PersistResult>(second).size(), 1u);
  EXPECT_EQ(h.job("a").state, JobState::kDone);
  EXPECT_EQ(h.sched.counts().by_status.at(ResultStatus::kPass), 1);
  EXPECT_EQ(h.sched.counts().by_status.count(ResultStatus::kTimeout), 0u);
}

TEST(SchedulerTest, AResultForAJobLeasedToAnotherWorkerIsForbiddenAndNotStored) {
  SchedulerHarness h;
  h.submit({make_job("a")});
  h.ready("victim", 1);
  h.ready("rogue", 1);
  ASSERT_EQ(h.job("a").worker_id, "victim");
  ResultRefusal why = ResultRefusal::kNone;
  ResultRecord forged;
  forged.job_id = "a";
  forged.attempt = 1;
  forged.status = ResultStatus::kPass;
  forged.worker_id = "victim";  // the body may name anyone
  auto a = h.checked(h.sched.on_result({"rogue", forged}, h.now, &why));
  EXPECT_EQ(why, ResultRefusal::kNotLeased);
  EXPECT_TRUE(only<PersistResult>(a).empty());
  EXPECT_TRUE(only<SendAck>(a).empty());
  auto e = only<SendError>(a);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].worker_id, "rogue");
  EXPECT_EQ(e[0].error.code, protocol::ErrorCode::kForbidden);
  EXPECT_EQ(h.job("a").state, JobState::kLeased);
  // The holder's own result is still taken.
  EXPECT_EQ(only<PersistResult>(h.result("victim", "a", 1)).size(), 1u);
}

TEST(SchedulerTest, AResultOfAQueuedJobNeverDeliveredIsForbidden) {
  SchedulerHarness h;
  h.ready("rogue", 0);  // no slots: takes nothing
  h.submit({make_job("a")});
  for (int attempt : {1, 2, 7}) {
    ResultRefusal why = ResultRefusal::kNone;
    ResultRecord forged;
    forged.job_id = "a";
    forged.attempt = attempt;
    auto a = h.checked(h.sched.on_result({"rogue", forged}, h.now, &why));
    EXPECT_EQ(why, ResultRefusal::kNotLeased) << attempt;
    ASSERT_EQ(only<SendError>(a).size(), 1u);
    EXPECT_EQ(only<SendError>(a)[0].error.code, protocol::ErrorCode::kForbidden);
  }
  EXPECT_EQ(h.job("a").state, JobState::kQueued);
  EXPECT_EQ(h.job("a").attempt, 0);
}

TEST(SchedulerTest, AStoredRowNamesTheWorkerThatReportedIt) {
  SchedulerHarness h;
  h.submit({make_job("a")});
  h.ready("w1", 1);
  ResultRecord r;
  r.job_id = "a";
  r.attempt = 1;
  r.worker_id = "someone-else";
  auto rows = only<PersistResult>(h.checked(h.sched.on_result({"w1", r}, h.now)));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].result.worker_id, "w1");
}

TEST(SchedulerTest, AResultOfALeaseThatEndedIsAcknowledgedButNotStored) {
  SchedulerHarness h;
  h.submit({make_job("a")});
  h.ready("w1", 1);
  h.heartbeat("w1");
  h.disconnect("w1", "socket closed");
  ASSERT_EQ(h.job("a").state, JobState::kQueued);
  auto a = h.result("w1", "a", 1);
  EXPECT_EQ(only<SendError>(a).size(), 1u) << "w1 is not registered";
  h.ready("w1", 1, cpu_caps());  // re-registers; gets attempt 2 of the queued job
  ASSERT_EQ(h.job("a").attempt, 2);
  auto late = h.result("w1", "a", 1);
  ASSERT_EQ(late.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<SendAck>(late[0]));
  EXPECT_EQ(h.job("a").state, JobState::kLeased);
  h.result_committed("w1", "a", 2);
  EXPECT_EQ(h.job("a").state, JobState::kDone);
}

TEST(SchedulerTest, AJobWhoseResultAwaitsCommitIsNotDispatchedAgain) {
  SchedulerHarness h;
  h.submit({make_job("a")});
  h.ready("w1", 1);
  h.result("w1", "a", 1);  // not committed
  h.ready("w2", 1);
  h.heartbeat("w2");
  auto t = h.tick(1'000);  // w1's lease expires
  EXPECT_TRUE(sent_ids(t).empty());
  EXPECT_EQ(h.job("a").state, JobState::kQueued);
  h.commit("a");
  EXPECT_EQ(h.job("a").state, JobState::kDone);
}

TEST(SchedulerTest, AJobWhoseResultAwaitsCommitIsNeverMadeLost) {
  SchedulerHarness h({.lease_ms = 1'000, .worker_timeout_ms = 5'000, .max_attempts = 1});
  h.submit({make_job("a")});
  h.ready("w1", 1);
  h.result("w1", "a", 1, ResultStatus::kCrash);
  auto t = h.tick(1'000);
  for (const auto& p : only<PersistResult>(t)) EXPECT_EQ(p.result.status, ResultStatus::kCrash);
  EXPECT_NE(h.job("a").state, JobState::kLost);
  h.commit("a");
  EXPECT_EQ(h.job("a").state, JobState::kDone);
  EXPECT_EQ(h.sched.counts().by_status.count(ResultStatus::kLost), 0u);
}

TEST(SchedulerTest, AResultFromAnUnknownWorkerAsksItToSendReady) {
  SchedulerHarness h;
  h.submit({make_job("a")});
  auto a = h.result("ghost", "a", 1);
  auto e = only<SendError>(a);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].error.code, protocol::ErrorCode::kUnknownWorker);
}

TEST(SchedulerTest, AResultForAnUnknownJobIsABadRequest) {
  SchedulerHarness h;
  h.ready("w1", 1);
  auto a = h.result("w1", "nope", 1);
  auto e = only<SendError>(a);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].error.code, protocol::ErrorCode::kBadRequest);
}

TEST(SchedulerTest, AResultWithoutAnAttemptNumberIsABadRequest) {
  SchedulerHarness h;
  h.submit({make_job("a")});
  h.ready("w1", 1);
  auto e = only<SendError>(h.result("w1", "a", 0));
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].error.code, protocol::ErrorCode::kBadRequest);
  EXPECT_EQ(h.job("a").state, JobState::kLeased);
}

TEST(SchedulerTest, AResultOfAnAttemptAheadOfTheRestoredRecordIsForbidden) {
  // A delivery is stored before it is sent (FarmCore::execute drops the JOB whose lease was not
  // stored): an attempt ahead of the stored record was never delivered.
  SchedulerHarness h;
  JobRecord queued;
  queued.spec = make_job("a");
  StoreSnapshot snap;
  snap.jobs = {queued};
  h.sched.restore(snap, h.now, h.now);
  h.ready("w1", 0);
  auto a = h.result("w1", "a", 1);
  EXPECT_TRUE(only<PersistResult>(a).empty());
  ASSERT_EQ(only<SendError>(a).size(), 1u);
  EXPECT_EQ(only<SendError>(a)[0].error.code, protocol::ErrorCode::kForbidden);
  EXPECT_EQ(h.job("a").state, JobState::kQueued);
}

TEST(SchedulerTest, AResultForALostJobIsOnlyAcknowledged) {
  SchedulerHarness h({.lease_ms = 1'000, .worker_timeout_ms = 5'000, .max_attempts = 1});
  h.submit({make_job("a")});
  h.ready("w1", 1);
  h.tick(1'000);
  h.commit("a");
  auto a = h.result("w1", "a", 1);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<SendAck>(a[0]));
}

// ---- workers going away

TEST(SchedulerTest, ASilentWorkerIsForgottenAndItsLeasesRequeued) {
  SchedulerHarness h({.lease_ms = 10'000, .worker_timeout_ms = 3'000, .max_attempts = 3});
  h.submit({make_job("a")});
  h.ready("w1", 1);
  h.tick(3'000);
  EXPECT_EQ(h.sched.workers().count("w1"), 1u) << "silent for exactly the timeout: kept";
  auto t = h.tick(1);
  EXPECT_EQ(h.sched.workers().count("w1"), 0u);
  EXPECT_EQ(h.sched.heartbeats_missed(), 1);
  EXPECT_EQ(h.job("a").state, JobState::kQueued);
  EXPECT_THAT(h.job("a").attempt_reasons, ElementsAre("worker w1 went silent"));
  EXPECT_EQ(only<SendError>(h.heartbeat("w1")).size(), 1u) << "it must send READY again";
}

TEST(SchedulerTest, AWorkerThatHeartbeatsIsNotForgotten) {
  SchedulerHarness h({.lease_ms = 10'000, .worker_timeout_ms = 3'000, .max_attempts = 3});
  h.ready("w1", 1);
  for (int i = 0; i < 5; ++i) {
    h.tick(2'000);
    h.heartbeat("w1");
  }
  EXPECT_EQ(h.sched.workers().count("w1"), 1u);
  EXPECT_EQ(h.sched.heartbeats_missed(), 0);
}

TEST(SchedulerTest, DisconnectRequeuesTheWorkersLeasesWithTheReason) {
  SchedulerHarness h;
  h.submit({make_job("a"), make_job("b")});
  h.ready("w1", 2);
  auto d = h.disconnect("w1", "shutting down");
  EXPECT_EQ(h.sched.workers().count("w1"), 0u);
  EXPECT_EQ(h.sched.counts().queued, 2);
  EXPECT_THAT(h.job("a").attempt_reasons, ElementsAre("worker w1 disconnected: shutting down"));
  EXPECT_EQ(only<PersistJob>(d).size(), 2u);
  auto r = h.ready("w2", 2);
  EXPECT_EQ(sent_ids(r, "w2"), (Ids{"a", "b"}));
  EXPECT_EQ(h.job("a").attempt, 2);
}

TEST(SchedulerTest, DisconnectOfAnUnknownWorkerChangesNothing) {
  SchedulerHarness h;
  EXPECT_THAT(h.disconnect("ghost", "bye"), IsEmpty());
}

// ---- restart

StoreSnapshot snapshot_with(std::vector<JobRecord> jobs, std::vector<ResultRecord> results = {}) {
  StoreSnapshot s;
  s.jobs = std::move(jobs);
  s.results = std::move(results);
  return s;
}

JobRecord record(const std::string& id, JobState state, int attempt = 0,
                 const std::string& worker = "") {
  JobRecord r;
  r.spec = make_job(id);
  r.state = state;
  r.attempt = attempt;
  r.worker_id = worker;
  r.lease_expires_ms = worker.empty() ? 0 : 42;  // a time of the previous coordinator
  return r;
}

TEST(SchedulerTest, RestoreRequeuesQueuedJobsInSnapshotOrder) {
  SchedulerHarness h;
  h.sched.restore(snapshot_with({record("z", JobState::kQueued), record("a", JobState::kQueued),
                                 record("m", JobState::kQueued, 1)}),
                  h.now, h.now);
  ASSERT_TRUE(h.sched.check_invariants(h.now).ok());
  auto a = h.ready("w1", 3);
  EXPECT_EQ(sent_ids(a), (Ids{"z", "a", "m"}));
  EXPECT_EQ(h.job("m").attempt, 2);
}

TEST(SchedulerTest, RestoreCountsStoredResultsByStatus) {
  SchedulerHarness h;
  ResultRecord pass, lost;
  pass.job_id = "a";
  pass.status = ResultStatus::kPass;
  lost.job_id = "b";
  lost.status = ResultStatus::kLost;
  h.sched.restore(snapshot_with({record("a", JobState::kDone, 1), record("b", JobState::kLost, 3)}, {pass, lost}),
                  h.now, h.now);
  auto c = h.sched.counts();
  EXPECT_EQ(c.done, 1);
  EXPECT_EQ(c.lost, 1);
  EXPECT_EQ(c.by_status.at(ResultStatus::kPass), 1);
  EXPECT_EQ(c.by_status.at(ResultStatus::kLost), 1);
  EXPECT_TRUE(h.sched.all_finished());
}

TEST(SchedulerTest, RestoreKeepsALeaseForTheWorkerThatRegistersAgain) {
  SchedulerHarness h;
  h.sched.restore(snapshot_with({record("a", JobState::kLeased, 1, "w1")}), h.now, h.now);
  ASSERT_TRUE(h.sched.check_invariants(h.now).ok());
  EXPECT_EQ(h.job("a").lease_expires_ms, h.now + 1'000) << "a fresh lease on this clock";
  EXPECT_EQ(only<SendError>(h.heartbeat("w1")).size(), 1u) << "w1 must send READY first";
  h.tick(500);
  auto r = h.ready("w1", 1);
  EXPECT_TRUE(sent_ids(r).empty());
  EXPECT_EQ(h.sched.workers().at("w1").leased.count("a"), 1u);
  h.heartbeat("w1", {{"a", 1}});
  h.tick(900);  // past the restored lease, inside the renewed one
  EXPECT_EQ(h.job("a").state, JobState::kLeased);
  EXPECT_EQ(h.job("a").worker_id, "w1");
  h.result_committed("w1", "a", 1);
  EXPECT_EQ(h.job("a").state, JobState::kDone);
}

TEST(SchedulerTest, ReadyWithFewerSlotsThanItsRestoredLeasesRequeuesTheLeasesThatNoLongerFit) {
  SchedulerHarness h;
  h.sched.restore(snapshot_with({record("a", JobState::kLeased, 1, "w1"), record("b", JobState::kLeased, 1, "w1")}),
                  h.now, h.now);
  h.ready("w1", 1);
  EXPECT_EQ(h.sched.workers().at("w1").leased.size(), 1u);
  EXPECT_EQ(h.sched.counts().queued, 1);
}

TEST(SchedulerTest, RestoreExpiresALeaseWhoseWorkerNeverReturns) {
  SchedulerHarness h;
  h.sched.restore(snapshot_with({record("a", JobState::kLeased, 1, "w1")}), h.now, h.now);
  h.ready("w2", 1);
  h.heartbeat("w2");
  h.tick(999);
  EXPECT_EQ(h.job("a").state, JobState::kLeased);
  auto t = h.tick(1);
  EXPECT_THAT(h.job("a").attempt_reasons, ElementsAre("lease expired on worker w1 at attempt 1"));
  EXPECT_EQ(sent_ids(t, "w2"), Ids{"a"});
  EXPECT_EQ(h.job("a").attempt, 2);
}

TEST(SchedulerTest, ARestoredLeaseTheReturningWorkerDoesNotListIsReleasedByItsHeartbeats) {
  // The phantom lease of issue 19: the worker re-registers after the restart but never got (or
  // lost) the job; its slot must not idle until the lease runs out.
  SchedulerHarness h;
  h.sched.restore(snapshot_with({record("a", JobState::kLeased, 1, "w1")}), h.now, h.now);
  h.ready("w1", 1);
  h.heartbeat("w1");
  auto a = h.heartbeat("w1");
  EXPECT_EQ(sent_ids(a, "w1"), Ids{"a"});
  EXPECT_EQ(h.job("a").attempt, 2);
}

TEST(SchedulerTest, ARestoredLeaseIsNotReArmedByTheNextRestart) {
  SchedulerHarness h;  // lease 1000 ms
  auto first = h.sched.restore(snapshot_with({record("a", JobState::kLeased, 1, "w1")}), h.now, h.now);
  auto p = only<PersistJob>(first);
  ASSERT_EQ(p.size(), 1u) << "the moment it was found orphaned is stored";
  EXPECT_EQ(p[0].job.orphaned_wall_ms, h.now);
  // 600 ms later the coordinator restarts again, from what it stored.
  SchedulerHarness r;
  r.now = h.now + 600;
  auto second = r.sched.restore(snapshot_with({p[0].job}), r.now, r.now);
  EXPECT_TRUE(only<PersistJob>(second).empty());
  EXPECT_EQ(r.job("a").lease_expires_ms, r.now + 400) << "what is left of the first grace";
  r.ready("w2", 1);
  r.heartbeat("w2");
  auto t = r.tick(400);
  EXPECT_EQ(sent_ids(t, "w2"), Ids{"a"});
  // Restarting long after gives nothing either.
  SchedulerHarness late;
  late.now = h.now + 60'000;
  late.sched.restore(snapshot_with({p[0].job}), late.now, late.now);
  EXPECT_EQ(late.job("a").lease_expires_ms, late.now);
}

TEST(SchedulerTest, AdoptingARestoredLeaseClearsItsOrphanedTime) {
  SchedulerHarness h;
  h.sched.restore(snapshot_with({record("a", JobState::kLeased, 1, "w1")}), h.now, h.now);
  auto a = h.ready("w1", 1);
  auto p = only<PersistJob>(a);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].job.orphaned_wall_ms, 0);
  EXPECT_EQ(p[0].job.worker_id, "w1");
}

TEST(SchedulerTest, RestoreTrustsAStoredResultOverAnOlderJobRecord) {
  SchedulerHarness h;
  ResultRecord pass;
  pass.job_id = "a";
  pass.attempt = 1;
  pass.status = ResultStatus::kPass;
  h.sched.restore(snapshot_with({record("a", JobState::kLeased, 1, "w1")}, {pass}), h.now, h.now);
  EXPECT_EQ(h.job("a").state, JobState::kDone);
  EXPECT_TRUE(h.sched.all_finished());
  EXPECT_TRUE(h.sched.check_invariants(h.now).ok());
}

TEST(SchedulerTest, RestoreReplacesAllEarlierState) {
  SchedulerHarness h;
  h.submit({make_job("old")});
  h.ready("w1", 1);
  h.sched.restore(snapshot_with({record("new", JobState::kQueued)}), h.now, h.now);
  EXPECT_EQ(h.sched.jobs().count("old"), 0u);
  EXPECT_TRUE(h.sched.workers().empty());
  EXPECT_TRUE(h.sched.check_invariants(h.now).ok());
}

// ---- cancel

JobSpec job_of(const std::string& id, const std::string& campaign) {
  JobSpec s = make_job(id);
  s.campaign_id = campaign;
  return s;
}

TEST(SchedulerTest, CancelEndsQueuedJobsAtOnceAndTellsTheWorkersOfRunningOnes) {
  SchedulerHarness h;
  h.ready("w1", 1);
  h.submit({job_of("a", "c1"), job_of("b", "c1"), job_of("c", "c1"), job_of("x", "c2")});
  h.result_committed("w1", "a", 1);  // a finished; b now runs on w1; c and x wait
  ASSERT_EQ(h.job("b").state, JobState::kLeased);
  Scheduler::CancelCounts counts;
  auto a = h.checked(h.sched.cancel("c1", "superseded", h.now, &counts));
  EXPECT_EQ(counts.cancelled, 1);
  EXPECT_EQ(counts.stopping, 1);
  EXPECT_EQ(counts.finished, 1);
  auto rows = only<PersistResult>(a);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].result.job_id, "c");
  EXPECT_EQ(rows[0].result.status, ResultStatus::kCancelled);
  EXPECT_EQ(rows[0].result.reason, "campaign c1 was cancelled: superseded");
  EXPECT_EQ(rows[0].job.state, JobState::kDone);
  auto cancels = only<SendCancel>(a);
  ASSERT_EQ(cancels.size(), 1u);
  EXPECT_EQ(cancels[0].worker_id, "w1");
  EXPECT_EQ(cancels[0].cancel.job_id, "b");
  EXPECT_EQ(cancels[0].cancel.attempt, 1);
  EXPECT_TRUE(sent_ids(a).empty()) << "the slot is still b's";
  h.commit("c");
  EXPECT_EQ(h.job("c").state, JobState::kDone);
  // b's worker stops it and reports; the slot goes to the other campaign's job.
  auto after = h.result_committed("w1", "b", 1, ResultStatus::kCancelled);
  EXPECT_EQ(sent_ids(after, "w1"), Ids{"x"});
  EXPECT_EQ(h.sched.counts().by_status.at(ResultStatus::kCancelled), 2);
}

TEST(SchedulerTest, ACancelledCampaignsLeaseThatExpiresEndsTheJobInsteadOfRequeueingIt) {
  SchedulerHarness h;
  h.ready("w1", 1);
  h.submit({job_of("a", "c1")});
  h.checked(h.sched.cancel("c1", "", h.now));
  auto a = h.tick(h.sched.options().lease_ms);  // the worker never answers
  auto rows = only<PersistResult>(a);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].result.status, ResultStatus::kCancelled);
  EXPECT_EQ(rows[0].result.stage, "lease");
  EXPECT_EQ(rows[0].result.reason, "campaign c1 was cancelled");
  EXPECT_THAT(rows[0].result.attempt_reasons, ::testing::SizeIs(1));
  EXPECT_TRUE(sent_ids(a).empty());
  h.commit("a");
  EXPECT_TRUE(h.sched.all_finished());
}

TEST(SchedulerTest, CancelTwiceChangesNothingAndAnotherCampaignIsUntouched) {
  SchedulerHarness h;
  h.submit({job_of("a", "c1"), job_of("x", "c2")});
  h.checked(h.sched.cancel("c1", "", h.now));
  h.commit("a");
  Scheduler::CancelCounts again;
  auto a = h.checked(h.sched.cancel("c1", "", h.now, &again));
  EXPECT_TRUE(only<PersistResult>(a).empty());
  EXPECT_EQ(again.finished, 1);
  EXPECT_EQ(again.cancelled, 0);
  EXPECT_TRUE(h.sched.cancelled("c1"));
  EXPECT_FALSE(h.sched.cancelled("c2"));
  EXPECT_EQ(sent_ids(h.ready("w1", 2)), Ids{"x"});
}

TEST(SchedulerTest, AResultOnItsWayIsNotCancelledOverAndARowIsNeverWrittenTwice) {
  SchedulerHarness h;
  h.ready("w1", 1);
  h.submit({job_of("a", "c1")});
  h.result("w1", "a", 1);  // PASS received, its write not yet confirmed
  Scheduler::CancelCounts c;
  auto a = h.checked(h.sched.cancel("c1", "", h.now, &c));
  EXPECT_TRUE(only<PersistResult>(a).empty());
  EXPECT_EQ(c.finished, 1);
  h.commit("a");
  EXPECT_EQ(h.sched.counts().by_status.at(ResultStatus::kPass), 1);
  EXPECT_EQ(h.sched.counts().by_status.count(ResultStatus::kCancelled), 0u);
}

TEST(SchedulerTest, AWorkerReturningAfterARestartIsToldToStopItsJobOfACancelledCampaign) {
  SchedulerHarness h;
  h.ready("w1", 1);
  h.submit({job_of("a", "c1")});
  // The coordinator restarts: the lease comes back as an orphan, the campaign is cancelled again
  // from its stored record before the worker has re-registered.
  StoreSnapshot snap;
  snap.jobs.push_back(h.job("a"));
  SchedulerHarness r;
  r.sched.restore(snap, r.now, r.now);
  Scheduler::CancelCounts c;
  auto a = r.checked(r.sched.cancel("c1", "", r.now, &c));
  EXPECT_EQ(c.stopping, 1);
  EXPECT_TRUE(only<SendCancel>(a).empty()) << "no worker to tell yet";
  auto back = r.ready("w1", 1);
  auto cancels = only<SendCancel>(back);
  ASSERT_EQ(cancels.size(), 1u);
  EXPECT_EQ(cancels[0].worker_id, "w1");
  EXPECT_EQ(cancels[0].cancel.job_id, "a");
}

TEST(SchedulerTest, AWorkerStillHeartbeatingACancelledJobIsToldAgainEveryHalfLease) {
  SchedulerHarness h;  // lease 1000 ms
  h.ready("w1", 1);
  h.submit({job_of("a", "c1")});
  ASSERT_EQ(only<SendCancel>(h.checked(h.sched.cancel("c1", "", h.now))).size(), 1u);
  h.now += 200;
  EXPECT_TRUE(only<SendCancel>(h.heartbeat("w1", {{"a", 1}})).empty()) << "not again at once";
  h.now += 400;  // 600 ms after the first: that message may have been lost
  auto again = only<SendCancel>(h.heartbeat("w1", {{"a", 1}}));
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].cancel.job_id, "a");
  // Its result ends it; nothing more is sent.
  h.result_committed("w1", "a", 1, ResultStatus::kCancelled);
  h.now += 1000;
  EXPECT_TRUE(only<SendCancel>(h.heartbeat("w1", {{"a", 1}})).empty());
}

}  // namespace
}  // namespace ak
