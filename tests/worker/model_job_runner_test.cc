// ModelJobRunner with the real pipeline (models/profile_model.py, embedded) and the real Python
// with torch, on the CPU: a profile, a model that cannot be loaded, one that hangs, a cancel, and a
// confined run.
#include "worker/model_job_runner.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>

#include "common/confine.h"

namespace ak {
namespace {

namespace fs = std::filesystem;

class ModelJobRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("model_job_runner_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    runner_.reset();
    fs::remove_all(dir_);
  }
  void make(ConfinementPolicy policy = {}) {
    ModelJobRunnerOptions o;
    o.python = AK_PYTHON;
    o.work_dir = (dir_ / "work").string();
    o.ceilings.copy_bandwidth_gbps = 50;
    o.ceilings.gemm_tflops["fp32"] = 1;
    o.confinement = std::move(policy);
    runner_ = std::make_unique<ModelJobRunner>(o);
  }
  static protocol::Job job(const std::string& id, const std::string& model, const std::string& code = "") {
    protocol::Job j;
    j.spec.job_id = id;
    j.spec.kernel_type = "model";
    ModelTask t;
    t.model = model;
    t.model_code = code;
    t.dtype = "fp32";
    t.iters = 2;
    t.warmup = 1;
    j.spec.model = t;
    j.attempt = 1;
    return j;
  }
  void start(const protocol::Job& j, std::chrono::milliseconds timeout = std::chrono::minutes(5)) {
    const std::string id = j.spec.job_id;
    runner_->start(j, timeout, [this, id](std::optional<ResultRecord> r) {
      std::lock_guard<std::mutex> lock(mu_);
      got_[id] = std::move(r);
      cv_.notify_all();
    });
  }
  std::optional<ResultRecord> wait(const std::string& id) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::minutes(5), [&] { return got_.count(id) > 0; })) {
      ADD_FAILURE() << "job " << id << " never ended";
      return std::nullopt;
    }
    return got_[id];
  }

  fs::path dir_;
  std::unique_ptr<ModelJobRunner> runner_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::optional<ResultRecord>> got_;
};

constexpr const char* kHangs =
    "import torch\n"
    "class Net(torch.nn.Module):\n"
    "    def forward(self, x):\n"
    "        while True:\n"
    "            x = x + 1\n"
    "def build_model():\n"
    "    return Net()\n"
    "def example_inputs():\n"
    "    return (torch.zeros(2),)\n";

TEST_F(ModelJobRunnerTest, AnExampleModelsProfileIsAPassWithEveryOpCountedOnce) {
  make();
  EXPECT_TRUE(runner_->accepts(job("p", "examples/gpt2:tiny").spec));
  start(job("p", "examples/gpt2:tiny"));
  auto r = wait("p");
  ASSERT_TRUE(r.has_value());
  const ResultRecord& rec = *r;
  ASSERT_EQ(rec.status, ResultStatus::kPass) << rec.stage << ": " << rec.reason;
  ASSERT_TRUE(rec.model.is_object());
  EXPECT_EQ(rec.model.at("model"), "examples/gpt2:tiny");
  const double total = rec.model.at("total_us_per_iter").get<double>();
  double sum = 0;
  for (const auto& op : rec.model.at("ops")) sum += op.at("us_per_iter").get<double>();
  EXPECT_GT(total, 0);
  EXPECT_NEAR(sum, total, 0.01 * total);
  bool matmul = false;
  for (const auto& t : rec.model.at("targets")) matmul = matmul || t.at("kernel_type") == "matmul";
  EXPECT_TRUE(matmul) << rec.model.at("targets").dump();
}

TEST_F(ModelJobRunnerTest, AModelFileThatRaisesOnImportFailsNamingTheCause) {
  make();
  start(job("bad", "broken.py", "import torch\nraise ImportError('no such layer')\n"));
  auto r = wait("bad");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, ResultStatus::kFail);
  EXPECT_EQ(r->stage, "model");
  EXPECT_NE(r->reason.find("raised on import"), std::string::npos) << r->reason;
  EXPECT_NE(r->reason.find("ImportError: no such layer"), std::string::npos) << r->reason;
  // The runner serves the next job.
  start(job("next", "examples/bert:tiny"));
  auto n = wait("next");
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->status, ResultStatus::kPass) << n->reason;
}

TEST_F(ModelJobRunnerTest, AHangingModelEndsAtTheJobsTimeout) {
  make();
  const auto t0 = std::chrono::steady_clock::now();
  start(job("hang", "hangs.py", kHangs), std::chrono::seconds(8));
  auto r = wait("hang");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, ResultStatus::kTimeout) << r->reason;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60));
}

TEST_F(ModelJobRunnerTest, ACancelStopsARunningModelAndAWaitingOneEndsAtOnce) {
  make();
  // The hanging model says it runs through a FIFO (opened first, so its write never blocks).
  const fs::path fifo = dir_ / "started";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(fd, 0);
  const std::string code = std::string(kHangs) + "open('" + fifo.string() + "', 'w').write('running')\n";
  start(job("running", "hangs.py", code));
  start(job("waiting", "examples/gpt2:tiny"));
  EXPECT_EQ(runner_->cancel("waiting", 1), CancelEffect::kDropped);
  auto w = wait("waiting");
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->status, ResultStatus::kCancelled);
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 120'000), 1) << "the model never started";
  ::close(fd);
  EXPECT_EQ(runner_->cancel("running", 1), CancelEffect::kStopping);
  auto r = wait("running");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, ResultStatus::kCancelled) << r->reason;
  EXPECT_EQ(runner_->cancel("running", 1), CancelEffect::kNotHeld);
}

TEST_F(ModelJobRunnerTest, AConfinedProfileStillRuns) {
  auto policy = make_confinement_policy(false, {(dir_ / "hidden").string()});
  if (!policy.ok()) GTEST_SKIP() << "no confinement here: " << policy.status().message();
  make(*policy);
  start(job("c", "examples/llama:tiny"));
  auto r = wait("c");
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->status, ResultStatus::kPass) << r->stage << ": " << r->reason;
  bool rotary = false;
  for (const auto& t : r->model.at("targets")) rotary = rotary || t.at("kernel_type") == "rotary_embedding";
  EXPECT_TRUE(rotary);
}

}  // namespace
}  // namespace ak
