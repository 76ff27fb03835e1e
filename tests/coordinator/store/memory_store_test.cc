#include "coordinator/store/memory_store.h"

#include <gtest/gtest.h>

#include "tests/coordinator/store/store_contract.h"

namespace ak {
namespace {

using testing::sample_job;
using testing::sample_result;

struct MemoryStoreEnv {
  void SetUp() {}
  void TearDown() {}
  Store& store() { return s; }
  MemoryStore s;
};

}  // namespace

namespace testing {
INSTANTIATE_TYPED_TEST_SUITE_P(Memory, StoreContract, ::testing::Types<MemoryStoreEnv>);
}

namespace {

TEST(MemoryStore, EveryCallFailsUnavailableWhileSetUnavailable) {
  MemoryStore s;
  s.set_available(false);
  bool inserted = false;
  EXPECT_EQ(s.put_campaign(testing::sample_campaign()).code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.put_jobs({sample_job()}).code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.put_result(sample_result(), sample_job(), &inserted).code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.load().status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.result_count().status().code(), StatusCode::kUnavailable);
}

TEST(MemoryStore, NothingIsWrittenWhileUnavailable) {
  MemoryStore s;
  s.set_available(false);
  bool inserted = false;
  (void)s.put_result(sample_result(), sample_job(), &inserted);
  s.set_available(true);
  auto snap = s.load();
  ASSERT_TRUE(snap.ok());
  EXPECT_TRUE(snap->results.empty());
  EXPECT_TRUE(snap->jobs.empty());
}

TEST(MemoryStore, JobsLoadInTheOrderTheyWereFirstPut) {
  MemoryStore s;
  ASSERT_TRUE(s.put_jobs({sample_job("job-z"), sample_job("job-a")}).ok());
  ASSERT_TRUE(s.put_jobs({sample_job("job-m"), sample_job("job-z")}).ok());
  auto snap = s.load();
  ASSERT_TRUE(snap.ok());
  ASSERT_EQ(snap->jobs.size(), 3u);
  EXPECT_EQ(snap->jobs[0].spec.job_id, "job-z");
  EXPECT_EQ(snap->jobs[1].spec.job_id, "job-a");
  EXPECT_EQ(snap->jobs[2].spec.job_id, "job-m");
}

}  // namespace
}  // namespace ak
