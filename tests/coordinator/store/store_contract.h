// The Store contract (coordinator/store/store.h) as a typed test suite, run against every implementation:
// memory_store_test.cc instantiates it for MemoryStore, redis_store_test.cc for RedisStore on a
// real redis-server. An implementation `Env` provides SetUp(), TearDown() and `Store& store()`.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/store/store.h"
#include "tests/common/records.h"

namespace ak::testing {

template <typename Env>
class StoreContract : public ::testing::Test {
 protected:
  void SetUp() override { env_.SetUp(); }
  void TearDown() override { env_.TearDown(); }
  Store& store() { return env_.store(); }

  StoreSnapshot load_ok() {
    auto snap = store().load();
    EXPECT_TRUE(snap.ok()) << snap.status().to_string();
    return snap.ok() ? std::move(snap).value() : StoreSnapshot{};
  }

  Env env_;
};

TYPED_TEST_SUITE_P(StoreContract);

TYPED_TEST_P(StoreContract, AnEmptyStoreLoadsAnEmptySnapshot) {
  const StoreSnapshot snap = this->load_ok();
  EXPECT_TRUE(snap.campaigns.empty());
  EXPECT_TRUE(snap.jobs.empty());
  EXPECT_TRUE(snap.results.empty());
  auto n = this->store().result_count();
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0);
}

TYPED_TEST_P(StoreContract, ACampaignLoadsBackWithEveryField) {
  ASSERT_TRUE(this->store().put_campaign(sample_campaign("camp-1")).ok());
  const StoreSnapshot snap = this->load_ok();
  ASSERT_EQ(snap.campaigns.size(), 1u);
  EXPECT_EQ(as_json(snap.campaigns[0]), as_json(sample_campaign("camp-1")));
}

TYPED_TEST_P(StoreContract, JobsLoadBackWithEveryField) {
  ASSERT_TRUE(this->store().put_jobs({sample_job("job-1"), sample_job("job-2")}).ok());
  const StoreSnapshot snap = this->load_ok();
  ASSERT_EQ(snap.jobs.size(), 2u);
  EXPECT_EQ(as_json(snap.jobs[0]), as_json(sample_job("job-1")));
  EXPECT_EQ(as_json(snap.jobs[1]), as_json(sample_job("job-2")));
}

TYPED_TEST_P(StoreContract, PuttingAJobAgainOverwritesIt) {
  ASSERT_TRUE(this->store().put_jobs({sample_job("job-1")}).ok());
  JobRecord done = sample_job("job-1");
  done.state = JobState::kDone;
  ASSERT_TRUE(this->store().put_jobs({done}).ok());
  const StoreSnapshot snap = this->load_ok();
  ASSERT_EQ(snap.jobs.size(), 1u);
  EXPECT_EQ(snap.jobs[0].state, JobState::kDone);
}

TYPED_TEST_P(StoreContract, ABatchLargerThanOneCommandIsStoredWhole) {
  std::vector<JobRecord> jobs;
  for (int i = 0; i < 1234; ++i) jobs.push_back(sample_job("job-" + std::to_string(i)));
  ASSERT_TRUE(this->store().put_jobs(jobs).ok());
  EXPECT_EQ(this->load_ok().jobs.size(), 1234u);
}

TYPED_TEST_P(StoreContract, TheFirstResultOfAJobIsInserted) {
  bool inserted = false;
  ASSERT_TRUE(this->store().put_result(sample_result("job-1", 1), sample_job("job-1"), &inserted).ok());
  EXPECT_TRUE(inserted);
  const StoreSnapshot snap = this->load_ok();
  ASSERT_EQ(snap.results.size(), 1u);
  EXPECT_EQ(as_json(snap.results[0]), as_json(sample_result("job-1", 1)));
}

TYPED_TEST_P(StoreContract, ASecondResultForTheSameJobKeepsTheFirstRow) {
  bool inserted = false;
  ASSERT_TRUE(this->store().put_result(sample_result("job-1", 1), sample_job("job-1"), &inserted).ok());
  ResultRecord second = sample_result("job-1", 2);
  second.status = ResultStatus::kPass;
  ASSERT_TRUE(this->store().put_result(second, sample_job("job-1"), &inserted).ok());
  EXPECT_FALSE(inserted);
  const StoreSnapshot snap = this->load_ok();
  ASSERT_EQ(snap.results.size(), 1u);
  EXPECT_EQ(snap.results[0].attempt, 1);
  EXPECT_EQ(snap.results[0].status, sample_result().status);
}

TYPED_TEST_P(StoreContract, ADuplicateResultStillWritesTheJobRecord) {
  bool inserted = false;
  ASSERT_TRUE(this->store().put_result(sample_result("job-1", 1), sample_job("job-1"), &inserted).ok());
  JobRecord done = sample_job("job-1");
  done.state = JobState::kDone;
  ASSERT_TRUE(this->store().put_result(sample_result("job-1", 2), done, &inserted).ok());
  const StoreSnapshot snap = this->load_ok();
  ASSERT_EQ(snap.jobs.size(), 1u);
  EXPECT_EQ(snap.jobs[0].state, JobState::kDone);
}

TYPED_TEST_P(StoreContract, ResultsLoadInTheOrderTheyWereFirstStored) {
  const std::vector<std::string> ids = {"job-c", "job-a", "job-b", "job-e", "job-d"};
  bool inserted = false;
  for (const auto& id : ids) ASSERT_TRUE(this->store().put_result(sample_result(id), sample_job(id), &inserted).ok());
  ASSERT_TRUE(this->store().put_result(sample_result("job-c", 5), sample_job("job-c"), &inserted).ok());
  const StoreSnapshot snap = this->load_ok();
  ASSERT_EQ(snap.results.size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(snap.results[i].job_id, ids[i]);
}

TYPED_TEST_P(StoreContract, ResultCountCountsOneRowPerJob) {
  bool inserted = false;
  for (int attempt = 1; attempt <= 3; ++attempt)
    for (const char* id : {"job-1", "job-2"})
      ASSERT_TRUE(this->store().put_result(sample_result(id, attempt), sample_job(id), &inserted).ok());
  auto n = this->store().result_count();
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  EXPECT_EQ(*n, 2);
}

TYPED_TEST_P(StoreContract, TheFirstTunedEntryOfAKeyIsStoredWithEveryField) {
  bool stored = false;
  ASSERT_TRUE(this->store().put_best(sample_tuned(12.0), &stored).ok());
  EXPECT_TRUE(stored);
  auto best = this->store().load_best();
  ASSERT_TRUE(best.ok()) << best.status().to_string();
  ASSERT_EQ(best->size(), 1u);
  EXPECT_EQ(as_json((*best)[0]), as_json(sample_tuned(12.0)));
}

TYPED_TEST_P(StoreContract, OnlyAFasterEntryReplacesTheStoredOne) {
  bool stored = false;
  ASSERT_TRUE(this->store().put_best(sample_tuned(12.0, "job-a"), &stored).ok());
  ASSERT_TRUE(this->store().put_best(sample_tuned(13.0, "job-b"), &stored).ok());
  EXPECT_FALSE(stored);
  ASSERT_TRUE(this->store().put_best(sample_tuned(12.0, "job-c"), &stored).ok());
  EXPECT_FALSE(stored) << "a tie keeps the incumbent";
  ASSERT_TRUE(this->store().put_best(sample_tuned(11.0, "job-d"), &stored).ok());
  EXPECT_TRUE(stored);
  auto best = this->store().load_best();
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->size(), 1u);
  EXPECT_EQ((*best)[0].job_id, "job-d");
  EXPECT_EQ((*best)[0].m.latency_us, 11.0);
}

TYPED_TEST_P(StoreContract, TunedEntriesOfDifferentKeysLoadSortedByKey) {
  bool stored = false;
  TunedEntry a = sample_tuned(12.0);
  TunedEntry b = a;
  b.shape = {64, 128};
  TunedEntry c = a;
  c.gpu_model = "NVIDIA A100-SXM4-80GB";
  for (const auto& e : {a, b, c}) ASSERT_TRUE(this->store().put_best(e, &stored).ok());
  auto best = this->store().load_best();
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->size(), 3u);
  for (size_t i = 1; i < best->size(); ++i) EXPECT_LT(tuning_key((*best)[i - 1]), tuning_key((*best)[i]));
}

TYPED_TEST_P(StoreContract, SourcesLoadBackOncePerHashAndJobsKeepTheirHash) {
  const std::string big(1 << 20, 'k');
  ASSERT_TRUE(this->store().put_sources({{"00000000000000aa", big}, {"00000000000000bb", "small"}}).ok());
  // A hash stored again keeps its text.
  ASSERT_TRUE(this->store().put_sources({{"00000000000000aa", big}}).ok());
  JobRecord j = sample_job("job-1");
  j.spec.source.clear();
  j.spec.source_hash = "00000000000000aa";
  ASSERT_TRUE(this->store().put_jobs({j}).ok());
  const StoreSnapshot snap = this->load_ok();
  ASSERT_EQ(snap.sources.size(), 2u);
  EXPECT_EQ(snap.sources.at("00000000000000aa"), big);
  EXPECT_EQ(snap.sources.at("00000000000000bb"), "small");
  ASSERT_EQ(snap.jobs.size(), 1u);
  EXPECT_EQ(snap.jobs[0].spec.source_hash, "00000000000000aa");
  EXPECT_TRUE(snap.jobs[0].spec.source.empty());
}

REGISTER_TYPED_TEST_SUITE_P(StoreContract, AnEmptyStoreLoadsAnEmptySnapshot, ACampaignLoadsBackWithEveryField,
                            JobsLoadBackWithEveryField, PuttingAJobAgainOverwritesIt,
                            ABatchLargerThanOneCommandIsStoredWhole, TheFirstResultOfAJobIsInserted,
                            ASecondResultForTheSameJobKeepsTheFirstRow, ADuplicateResultStillWritesTheJobRecord,
                            ResultsLoadInTheOrderTheyWereFirstStored, ResultCountCountsOneRowPerJob,
                            TheFirstTunedEntryOfAKeyIsStoredWithEveryField, OnlyAFasterEntryReplacesTheStoredOne,
                            TunedEntriesOfDifferentKeysLoadSortedByKey, SourcesLoadBackOncePerHashAndJobsKeepTheirHash);

}  // namespace ak::testing
