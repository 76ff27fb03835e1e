// SandboxJobRunner on its own, with the fake compiler and sandbox: what a cancel and a shutdown do
// to a job in each of its states (waiting, compiling, compiled, measured).
#include "worker/sandbox_job_runner.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>

#include "tests/worker/worker_fakes.h"

namespace ak {
namespace {

using fakes::Events;
using fakes::FakeCompiler;
using fakes::FakeSandbox;
using fakes::kPatience;

// What each job's `done` said, waited for.
class Outcomes {
 public:
  JobDone done_for(const std::string& job_id) {
    return [this, job_id](std::optional<ResultRecord> r) {
      std::lock_guard<std::mutex> lock(mu_);
      ++calls_[job_id];
      got_[job_id] = std::move(r);
      cv_.notify_all();
    };
  }
  // The outcome of `job_id` (nullopt: dropped without a result); fails the test after kPatience.
  std::optional<ResultRecord> wait(const std::string& job_id) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, kPatience, [&] { return got_.count(job_id) > 0; })) {
      ADD_FAILURE() << "job " << job_id << " never ended";
      return std::nullopt;
    }
    return got_[job_id];
  }
  int calls(const std::string& job_id) {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_[job_id];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::optional<ResultRecord>> got_;
  std::map<std::string, int> calls_;
};

class SandboxJobRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto compiler = std::make_unique<FakeCompiler>(events_);
    auto sandbox = std::make_unique<FakeSandbox>(events_);
    compiler_ = compiler.get();
    sandbox_ = sandbox.get();
    SandboxJobRunnerOptions o;
    o.slots = 3;
    o.worker_id = "host-cpu0";
    caps_.arch = "sm_90a";
    runner_ = std::make_unique<SandboxJobRunner>(o, caps_, clock_, std::move(compiler), std::move(sandbox));
  }
  void TearDown() override {
    compiler_->gate().release();
    sandbox_->release();
    runner_.reset();
  }
  void start(const std::string& id, const std::string& source = "ok") {
    protocol::Job j;
    j.spec.job_id = id;
    j.spec.kernel_type = "softmax";
    j.spec.source = source;
    j.attempt = 1;
    runner_->start(j, std::chrono::milliseconds(30'000), outcomes_.done_for(id));
  }

  Events events_;
  Outcomes outcomes_;
  FakeClock clock_;
  Capabilities caps_;
  FakeCompiler* compiler_ = nullptr;
  FakeSandbox* sandbox_ = nullptr;
  std::unique_ptr<SandboxJobRunner> runner_;
};

TEST_F(SandboxJobRunnerTest, AcceptsEveryJobButKernelBenchProblems) {
  JobSpec candidate;
  EXPECT_TRUE(runner_->accepts(candidate));
  JobSpec problem;
  problem.kernelbench = KernelBenchTask{};
  EXPECT_FALSE(runner_->accepts(problem));
  EXPECT_EQ(runner_->slots(), 3);
}

TEST_F(SandboxJobRunnerTest, AJobCancelledWhileCompilingEndsCancelledAtCompileAndIsNeverMeasured) {
  compiler_->gate().block("c");
  start("c");
  ASSERT_TRUE(events_.wait_for("compiling c"));
  EXPECT_EQ(runner_->cancel("c", 1), CancelEffect::kStopping);
  EXPECT_EQ(runner_->cancel("c", 2), CancelEffect::kNotHeld) << "another attempt is another job";
  compiler_->gate().release();
  const auto r = outcomes_.wait("c");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, ResultStatus::kCancelled);
  EXPECT_EQ(r->stage, "compile");
  start("after");
  ASSERT_TRUE(outcomes_.wait("after"));
  EXPECT_EQ(events_.count("running c"), 0);
  EXPECT_EQ(outcomes_.calls("c"), 1);
}

TEST_F(SandboxJobRunnerTest, ACancelEndsAWaitingJobAtOnceAndLetsTheMeasuredOneFinish) {
  sandbox_->block("a");
  compiler_->gate().block("w");
  start("a");  // compiled, then measured until released
  start("w");  // the one compile thread compiles it until released
  start("q");  // waits for the compile thread
  ASSERT_TRUE(events_.wait_for("running a"));
  ASSERT_TRUE(events_.wait_for("compiling w"));
  EXPECT_EQ(runner_->cancel("q", 1), CancelEffect::kDropped);
  const auto q = outcomes_.wait("q");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->status, ResultStatus::kCancelled);
  EXPECT_EQ(q->stage, "worker");
  EXPECT_EQ(runner_->cancel("a", 1), CancelEffect::kFinishing);
  sandbox_->release();
  const auto a = outcomes_.wait("a");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, ResultStatus::kPass);
  EXPECT_EQ(a->source_hash, "src-a");
  EXPECT_DOUBLE_EQ(a->m.compile_ms, 12.5);
  EXPECT_EQ(events_.count("compiling q"), 0);
}

TEST_F(SandboxJobRunnerTest, ShutdownDropsJobsNotBegunWithoutAResultAndTheMeasurementInProgressReports) {
  sandbox_->block("a");
  start("a");
  start("b");
  ASSERT_TRUE(events_.wait_for("running a"));
  ASSERT_TRUE(events_.wait_for("compiled b"));
  runner_->shutdown();
  EXPECT_FALSE(outcomes_.wait("b")) << "compiled but not measured: dropped";
  start("late");
  EXPECT_FALSE(outcomes_.wait("late")) << "a job started after shutdown is dropped at once";
  sandbox_->release();
  const auto a = outcomes_.wait("a");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, ResultStatus::kPass);
  runner_.reset();  // joins the threads
  EXPECT_EQ(events_.count("running b"), 0);
  EXPECT_EQ(outcomes_.calls("b"), 1);
}

TEST_F(SandboxJobRunnerTest, ACompileErrorEndsTheJobWithoutTheSandbox) {
  start("bad", "bad");
  const auto r = outcomes_.wait("bad");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, ResultStatus::kCompileError);
  EXPECT_EQ(r->stage, "compile");
  EXPECT_TRUE(r->source_hash.empty()) << "left to the agent, which hashes the source";
  EXPECT_EQ(events_.count("running bad"), 0);
}

}  // namespace
}  // namespace ak
