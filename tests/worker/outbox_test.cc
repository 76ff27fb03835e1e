#include "worker/outbox.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "common/clock.h"

namespace ak {
namespace {

ResultRecord result(const std::string& id, int attempt, ResultStatus s = ResultStatus::kPass) {
  ResultRecord r;
  r.job_id = id;
  r.attempt = attempt;
  r.status = s;
  r.worker_id = "w1";
  r.reason = "reason of " + id;
  r.m.latency_us = 3.25;
  return r;
}

std::vector<std::string> ids(const std::vector<ResultRecord>& rs) {
  std::vector<std::string> out;
  for (const auto& r : rs) out.push_back(r.job_id + "/" + std::to_string(r.attempt));
  return out;
}

class TempDir {
 public:
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "ak-outbox-XXXXXX").string();
    path_ = mkdtemp(t.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

size_t line_count(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) ++n;
  return n;
}

TEST(Outbox, AddedResultBecomesDueAfterTheResendInterval) {
  FakeClock clock;
  Outbox box(OutboxOptions{2000, 30000, "", false});
  ASSERT_TRUE(box.open(clock.now_ms()).ok());
  ASSERT_TRUE(box.add(result("a", 1), clock.now_ms()).ok());
  EXPECT_TRUE(box.due(clock.now_ms()).empty());
  clock.advance(std::chrono::milliseconds(1999));
  EXPECT_TRUE(box.due(clock.now_ms()).empty());
  clock.advance(std::chrono::milliseconds(1));
  EXPECT_EQ(ids(box.due(clock.now_ms())), std::vector<std::string>{"a/1"});
  EXPECT_TRUE(box.due(clock.now_ms()).empty()) << "a resend reschedules the entry";
}

TEST(Outbox, ResendIntervalDoublesUpToTheCap) {
  FakeClock clock;
  Outbox box(OutboxOptions{1000, 3000, "", false});
  ASSERT_TRUE(box.add(result("a", 1), clock.now_ms()).ok());
  clock.advance(std::chrono::milliseconds(1000));
  EXPECT_EQ(box.due(clock.now_ms()).size(), 1u);  // next in 2000
  clock.advance(std::chrono::milliseconds(1999));
  EXPECT_TRUE(box.due(clock.now_ms()).empty());
  clock.advance(std::chrono::milliseconds(1));
  EXPECT_EQ(box.due(clock.now_ms()).size(), 1u);  // next in 3000 (capped, not 4000)
  EXPECT_EQ(box.next_due_ms(), clock.now_ms() + 3000);
  clock.advance(std::chrono::milliseconds(3000));
  EXPECT_EQ(box.due(clock.now_ms()).size(), 1u);
}

TEST(Outbox, AckRemovesTheEntryAndUnknownAckIsHarmless) {
  FakeClock clock;
  Outbox box(OutboxOptions{});
  ASSERT_TRUE(box.add(result("a", 1), clock.now_ms()).ok());
  ASSERT_TRUE(box.add(result("a", 2), clock.now_ms()).ok());
  EXPECT_TRUE(box.ack("a", 1));
  EXPECT_FALSE(box.ack("a", 1));
  EXPECT_FALSE(box.ack("zzz", 1));
  EXPECT_FALSE(box.contains("a", 1));
  EXPECT_TRUE(box.contains("a", 2));
  clock.advance(std::chrono::hours(1));
  EXPECT_EQ(ids(box.due(clock.now_ms())), std::vector<std::string>{"a/2"});
}

TEST(Outbox, AllListsEntriesOldestFirstAndRestartBackoffReschedulesThem) {
  FakeClock clock;
  Outbox box(OutboxOptions{1000, 60000, "", false});
  ASSERT_TRUE(box.add(result("b", 1), clock.now_ms()).ok());
  ASSERT_TRUE(box.add(result("a", 1), clock.now_ms()).ok());
  EXPECT_EQ(ids(box.all()), (std::vector<std::string>{"b/1", "a/1"}));
  for (int i = 0; i < 5; ++i) {  // back off to a long interval
    clock.advance(std::chrono::milliseconds(60000));
    box.due(clock.now_ms());
  }
  box.restart_backoff(clock.now_ms());
  EXPECT_EQ(box.next_due_ms(), clock.now_ms() + 1000);
}

TEST(Outbox, AddingTheSameKeyAgainReplacesTheEntry) {
  FakeClock clock;
  Outbox box(OutboxOptions{});
  ASSERT_TRUE(box.add(result("a", 1, ResultStatus::kFail), clock.now_ms()).ok());
  ASSERT_TRUE(box.add(result("a", 1, ResultStatus::kPass), clock.now_ms()).ok());
  ASSERT_EQ(box.size(), 1u);
  EXPECT_EQ(box.all()[0].status, ResultStatus::kPass);
}

TEST(Outbox, UnacknowledgedResultsSurviveAReopenAndAreDueAtOnce) {
  TempDir dir;
  FakeClock clock;
  OutboxOptions o{2000, 30000, dir.file("outbox.jsonl"), false};
  {
    Outbox box(o);
    ASSERT_TRUE(box.open(clock.now_ms()).ok());
    ASSERT_TRUE(box.add(result("a", 1), clock.now_ms()).ok());
    ASSERT_TRUE(box.add(result("b", 1), clock.now_ms()).ok());
    ASSERT_TRUE(box.add(result("c", 2), clock.now_ms()).ok());
    EXPECT_TRUE(box.ack("b", 1));
  }
  clock.advance(std::chrono::milliseconds(10));
  Outbox again(o);
  ASSERT_TRUE(again.open(clock.now_ms()).ok());
  auto due = again.due(clock.now_ms());
  EXPECT_EQ(ids(due), (std::vector<std::string>{"a/1", "c/2"}));
  EXPECT_EQ(due[0].reason, "reason of a");
  EXPECT_DOUBLE_EQ(due[0].m.latency_us, 3.25);
  EXPECT_EQ(line_count(o.path), 2u) << "open() compacts the file to the live entries";
}

TEST(Outbox, TornLastLineIsSkippedOnLoad) {
  TempDir dir;
  FakeClock clock;
  OutboxOptions o{2000, 30000, dir.file("outbox.jsonl"), false};
  {
    Outbox box(o);
    ASSERT_TRUE(box.open(clock.now_ms()).ok());
    ASSERT_TRUE(box.add(result("a", 1), clock.now_ms()).ok());
  }
  {
    std::ofstream out(o.path, std::ios::app);
    out << R"({"op":"add","result":{"job_id":"b",)";  // the process died mid-write
  }
  Outbox again(o);
  ASSERT_TRUE(again.open(clock.now_ms()).ok());
  EXPECT_EQ(ids(again.all()), std::vector<std::string>{"a/1"});
}

TEST(Outbox, AcknowledgedLinesAreCompactedAway) {
  TempDir dir;
  FakeClock clock;
  OutboxOptions o{2000, 30000, dir.file("outbox.jsonl"), false};
  Outbox box(o);
  ASSERT_TRUE(box.open(clock.now_ms()).ok());
  ASSERT_TRUE(box.add(result("keep", 1), clock.now_ms()).ok());
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(box.add(result("j" + std::to_string(i), 1), clock.now_ms()).ok());
    ASSERT_TRUE(box.ack("j" + std::to_string(i), 1));
  }
  EXPECT_LT(line_count(o.path), 300u);
  Outbox again(o);
  ASSERT_TRUE(again.open(clock.now_ms()).ok());
  EXPECT_EQ(ids(again.all()), std::vector<std::string>{"keep/1"});
}

TEST(Outbox, OpenFailsClearlyWhenTheStateDirectoryIsMissing) {
  Outbox box(OutboxOptions{2000, 30000, "/nonexistent-dir-for-ak-test/outbox.jsonl", false});
  Status s = box.open(0);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("/nonexistent-dir-for-ak-test"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace ak
