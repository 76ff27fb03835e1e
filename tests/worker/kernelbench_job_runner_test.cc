// KernelBenchJobRunner with a stand-in for Python: a shell script that announces its step on a
// FIFO and then hangs, so that a job stays running until a cancel kills its step. No torch needed.
#include "worker/kernelbench_job_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include "tests/worker/worker_fakes.h"

namespace ak {
namespace {

namespace fs = std::filesystem;
using fakes::kPatience;

class KernelBenchJobRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("kb_job_runner_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fifo_ = dir_ / "steps";
    ASSERT_EQ(mkfifo(fifo_.c_str(), 0600), 0);
    // Opened before any step runs, so a step's write never blocks for want of a reader.
    fifo_fd_ = ::open(fifo_.c_str(), O_RDONLY | O_NONBLOCK);
    ASSERT_GE(fifo_fd_, 0);
    const fs::path python = dir_ / "python";
    // argv: -s harness.py <request>; the step writes its request's name (the last argument), then
    // hangs until killed.
    std::ofstream(python) << "#!/bin/sh\nfor a; do last=$a; done\necho \"$(basename \"$last\")\" > '" << fifo_.string()
                          << "'\nexec /bin/sleep 600\n";
    fs::permissions(python, fs::perms::owner_all);
    KernelBenchJobRunnerOptions o;
    o.slots = 1;
    o.runner.python = python.string();
    o.runner.work_dir = (dir_ / "work").string();
    runner_ = std::make_unique<KernelBenchJobRunner>(o);
  }
  void TearDown() override {
    runner_.reset();
    if (fifo_fd_ >= 0) ::close(fifo_fd_);
    fs::remove_all(dir_);
  }

  static protocol::Job job(const std::string& id, int attempt = 1) {
    protocol::Job j;
    j.spec.job_id = id;
    KernelBenchTask t;
    t.mode = "baseline";
    t.problem_name = "1_Problem.py";
    t.problem_code = "# not run: the stand-in Python hangs\n";
    j.spec.kernelbench = t;
    j.attempt = attempt;
    return j;
  }
  void start(const std::string& id) {
    runner_->start(job(id), std::chrono::milliseconds(600'000), [this, id](std::optional<ResultRecord> r) {
      std::lock_guard<std::mutex> lock(mu_);
      ++calls_[id];
      got_[id] = std::move(r);
      cv_.notify_all();
    });
  }
  std::optional<ResultRecord> wait(const std::string& id) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, kPatience, [&] { return got_.count(id) > 0; })) {
      ADD_FAILURE() << "job " << id << " never ended";
      return std::nullopt;
    }
    return got_[id];
  }
  // The next line a step wrote to the FIFO (its request's file name); "" after kPatience.
  std::string next_step() {
    std::string line;
    pollfd p{fifo_fd_, POLLIN, 0};
    while (line.empty() || line.back() != '\n') {
      if (::poll(&p, 1, static_cast<int>(kPatience.count())) <= 0) return "";
      char buf[256];
      const ssize_t n = ::read(fifo_fd_, buf, sizeof(buf));
      if (n == 0) return "";  // the writer left without a whole line
      if (n > 0) line.append(buf, static_cast<size_t>(n));
    }
    line.pop_back();
    return line;
  }

  fs::path dir_;
  fs::path fifo_;
  int fifo_fd_ = -1;
  std::unique_ptr<KernelBenchJobRunner> runner_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::optional<ResultRecord>> got_;
  std::map<std::string, int> calls_;
};

TEST_F(KernelBenchJobRunnerTest, AcceptsOnlyKernelBenchProblems) {
  EXPECT_TRUE(runner_->accepts(job("p").spec));
  EXPECT_FALSE(runner_->accepts(JobSpec{}));
  EXPECT_EQ(runner_->slots(), 1);
}

TEST_F(KernelBenchJobRunnerTest, ACancelKillsTheRunningJobsStepAndAWaitingJobEndsCancelledAtOnce) {
  start("running");
  ASSERT_EQ(next_step(), "baseline.request.json");
  start("waiting");  // the one slot is busy
  EXPECT_EQ(runner_->cancel("waiting", 1), CancelEffect::kDropped);
  const auto waiting = wait("waiting");
  ASSERT_TRUE(waiting);
  EXPECT_EQ(waiting->status, ResultStatus::kCancelled);
  EXPECT_EQ(waiting->stage, "worker");

  EXPECT_EQ(runner_->cancel("running", 2), CancelEffect::kNotHeld) << "another attempt is another job";
  EXPECT_EQ(runner_->cancel("running", 1), CancelEffect::kStopping);
  const auto running = wait("running");
  ASSERT_TRUE(running);
  EXPECT_EQ(running->status, ResultStatus::kCancelled) << running->reason;
  EXPECT_NE(running->reason.find("stopped in its baseline step"), std::string::npos) << running->reason;
  EXPECT_EQ(runner_->cancel("running", 1), CancelEffect::kNotHeld) << "it has ended";
}

TEST_F(KernelBenchJobRunnerTest, ShutdownDropsWaitingJobsWithoutAResultAndTheRunningJobStillEnds) {
  start("running");
  ASSERT_EQ(next_step(), "baseline.request.json");
  start("waiting");
  runner_->shutdown();
  EXPECT_FALSE(wait("waiting")) << "dropped without a result";
  start("late");
  EXPECT_FALSE(wait("late")) << "a job started after shutdown is dropped at once";
  EXPECT_EQ(runner_->cancel("running", 1), CancelEffect::kStopping);
  const auto running = wait("running");
  ASSERT_TRUE(running);
  EXPECT_EQ(running->status, ResultStatus::kCancelled);
  runner_.reset();  // joins the slot's thread
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_EQ(calls_["running"], 1);
  EXPECT_EQ(calls_["waiting"], 1);
}

}  // namespace
}  // namespace ak
