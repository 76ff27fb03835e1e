// ModelJobRunner with the real pipeline (models/profile_model.py and verify_model.py, embedded), the
// real Python with torch, the real compiler and libautokernel_ops.so, on the CPU: a profile, a
// model that cannot be loaded, one that hangs, a cancel, a confined run, and verify jobs.
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
#include "common/tuning.h"
#include "kernels/registry.h"
#include "worker/device.h"

namespace ak {
namespace {

namespace fs = std::filesystem;

class ModelJobRunnerTest : public ::testing::Test {
 public:
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
    o.backend = Backend::kCpu;
    o.caps = cpu_capabilities();
    o.compiler.cache_dir = (dir_ / "cache").string();
    o.compiler.confinement = o.confinement;
    o.ops_library = AK_OPS_LIBRARY;
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

// A tuning entry for the CPU starter of `type` (or `source`) at `shape`, fp32, as `best --export`
// writes it.
nlohmann::json tuned(const std::string& type, std::vector<int64_t> shape, const std::string& gpu = "",
                     const std::string& source = "") {
  TunedEntry e;
  e.kernel_type = type;
  e.backend = Backend::kCpu;
  e.gpu_model = gpu.empty() ? cpu_capabilities().gpu_name : gpu;
  e.dtype = DType::kF32;
  e.shape = std::move(shape);
  e.source = source.empty() ? kernels::find(type)->backends.at(Backend::kCpu).source : source;
  e.config = kernels::default_config(kernels::find(type)->backends.at(Backend::kCpu), DType::kF32);
  e.m.latency_us = 10;
  e.m.baseline_us = 15;
  e.m.speedup = 1.5;
  e.job_id = "tuned-" + type;
  return e;
}

protocol::Job verify_job(const std::string& id, nlohmann::json entries) {
  protocol::Job j = ModelJobRunnerTest::job(id, "examples/gpt2:tiny");
  j.spec.model->action = "verify";
  j.spec.model->tuned = std::move(entries);
  j.spec.model->targets =
      nlohmann::json::array({{{"kernel_type", "matmul"}, {"shape", {64, 192, 64}}, {"dtype", "fp32"}, {"share", 0.2}}});
  j.spec.model->decode_tokens = 4;
  j.spec.model->min_speedup = 0;  // plug in every kernel, slower than PyTorch's or not
  return j;
}

// gpt2:tiny (batch 2, sequence 32, width 64, vocabulary 512) with the CPU starters of its qkv
// projection and its layer norms plugged in; an entry of another GPU and one that does not compile
// are left out with their reasons.
TEST_F(ModelJobRunnerTest, AVerifyPlugsTheTunedKernelsInAndChecksOutputsDecodingAndTime) {
  auto policy = make_confinement_policy(false, {(dir_ / "hidden").string()});
  make(policy.ok() ? *policy : ConfinementPolicy{});
  start(verify_job("v", nlohmann::json::array({tuned("matmul", {64, 192, 64}), tuned("layernorm", {64, 64}),
                                               tuned("softmax", {64, 64}, "NVIDIA H200"),
                                               tuned("matmul", {64, 64, 64}, "", "this is not C++")})));
  auto r = wait("v");
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->status, ResultStatus::kPass) << r->stage << ": " << r->reason << "\n" << r->model.dump(1);
  const nlohmann::json& m = r->model;
  EXPECT_TRUE(m.at("outputs").at("pass").get<bool>()) << m.at("outputs").dump();
  std::map<std::string, int> calls;  // kernel type -> calls per forward
  for (const auto& x : m.at("replaced")) calls[x.at("kernel_type")] += x.at("calls_per_forward").get<int>();
  EXPECT_EQ(calls["matmul"], 2) << m.at("replaced").dump();     // one qkv projection per layer, 2 layers
  EXPECT_EQ(calls["layernorm"], 5) << m.at("replaced").dump();  // 2 per layer and the final one
  ASSERT_TRUE(m.contains("decode"));
  EXPECT_TRUE(m.at("decode").at("identical").get<bool>()) << m.at("decode").dump();
  for (const std::string v : {"eager", "tuned"}) EXPECT_GT(m.at("time").at(v).at("median_us").get<double>(), 0) << v;
  EXPECT_FALSE(m.at("time").contains("compile"));  // compile not asked for
  ASSERT_FALSE(m.at("predicted_speedup").is_null());
  // Amdahl: 1 / (1 - 0.2 * (1 - 1/1.5)).
  EXPECT_NEAR(m.at("predicted_speedup").get<double>(), 1.0 / (1.0 - 0.2 / 3.0), 1e-9);
  ASSERT_EQ(m.at("kernels_skipped").size(), 2u) << m.at("kernels_skipped").dump();
  EXPECT_NE(m.at("kernels_skipped")[0].at("reason").get<std::string>().find("NVIDIA H200"), std::string::npos);
  EXPECT_NE(m.at("kernels_skipped")[1].at("reason").get<std::string>().find("does not compile"), std::string::npos);
}

// A compiler that compiles nothing and counts what it was asked for.
class CountingCompiler final : public Compiler {
 public:
  Result<CompiledArtifact> compile(const JobSpec& job, const Capabilities&) override {
    asked.push_back(job.config);
    return Status::internal("not compiled in this test");
  }
  std::vector<std::map<std::string, int64_t>> asked;
};

// A tuned matmul whose configuration reads TMA tensor maps (AK_WGMMA=2) is left out where the
// consumer builds no maps (an exported package, `autokernel export --hf`), with that reason,
// before any compile; the same matmul with the cp.async wgmma path goes on to the compiler; so is
// a fused_mlp whose phases read them. For a model's verify (the torch library builds the maps,
// models/plug/ops.cc) all three go on to the compiler.
TEST_F(ModelJobRunnerTest, ATunedKernelThatReadsTensorMapsIsLeftOutOnlyWhereTheConsumerBuildsNone) {
  auto entry = [](int64_t wgmma, const char* type = "matmul") {
    TunedEntry e;
    e.kernel_type = type;
    e.backend = Backend::kCuda;
    e.gpu_model = "NVIDIA H100 80GB HBM3";
    e.dtype = DType::kBF16;
    e.shape = {2048, 2048, 2048};
    e.source = kernels::find(type)->backends.at(Backend::kCuda).source;
    e.config = {{"AK_BK", 64}, {"AK_WARPS_M", 2}, {"AK_WARPS_N", 2}, {"AK_WGMMA", wgmma}};
    e.m.latency_us = 20;
    e.m.baseline_us = 30;
    e.m.speedup = 1.5;
    e.job_id = std::string("tuned-") + type + "-wgmma-" + std::to_string(wgmma);
    return nlohmann::json(e);
  };
  Capabilities caps = cpu_capabilities();
  caps.gpu_name = "NVIDIA H100 80GB HBM3";
  const auto tuned = nlohmann::json::array({entry(2), entry(1), entry(2, "fused_mlp")});
  CountingCompiler compiler;
  auto prepared = compile_tuned_kernels(compiler, tuned, Backend::kCuda, caps, 1.0, (dir_ / "kernels").string(),
                                        /*tensor_maps=*/false);
  ASSERT_TRUE(prepared.ok()) << prepared.status().message();
  ASSERT_EQ(prepared->skipped.size(), 3u) << prepared->skipped.dump();
  EXPECT_NE(prepared->skipped[0].at("reason").get<std::string>().find("TMA tensor maps"), std::string::npos)
      << prepared->skipped[0].dump();
  EXPECT_NE(prepared->skipped[1].at("reason").get<std::string>().find("does not compile"), std::string::npos);
  // fused_mlp's phases read maps too (KernelSpec::cuda_phase_tensor_maps).
  EXPECT_NE(prepared->skipped[2].at("reason").get<std::string>().find("TMA tensor maps"), std::string::npos)
      << prepared->skipped[2].dump();
  ASSERT_EQ(compiler.asked.size(), 1u) << "only the entry without tensor maps reaches the compiler";
  EXPECT_EQ(compiler.asked[0].at("AK_WGMMA"), 1);

  CountingCompiler for_model;
  prepared = compile_tuned_kernels(for_model, tuned, Backend::kCuda, caps, 1.0, (dir_ / "kernels").string(),
                                   /*tensor_maps=*/true);
  ASSERT_TRUE(prepared.ok()) << prepared.status().message();
  ASSERT_EQ(for_model.asked.size(), 3u) << "every entry reaches the compiler";
  for (const auto& s : prepared->skipped)
    EXPECT_EQ(s.at("reason").get<std::string>().find("TMA"), std::string::npos) << s.dump();
}

// A tuned matmul that writes zeros: the model's outputs are wrong, so the job fails at "verify"
// and keeps the report that says by how much.
TEST_F(ModelJobRunnerTest, AVerifyWithAWrongKernelFailsAtStageVerify) {
  make();
  const std::string zeros =
      "#include <cstdint>\n"
      "extern \"C\" int ak_matmul_cpu(const void*, const void*, void* c, int64_t M, int64_t N, int64_t, int) {\n"
      "  for (int64_t i = 0; i < M * N; ++i) static_cast<float*>(c)[i] = 0.0f;\n"
      "  return 0;\n"
      "}\n";
  start(verify_job("w", nlohmann::json::array({tuned("matmul", {64, 192, 64}, "", zeros)})));
  auto r = wait("w");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, ResultStatus::kFail) << r->reason;
  EXPECT_EQ(r->stage, "verify");
  EXPECT_NE(r->reason.find("differ"), std::string::npos) << r->reason;
  ASSERT_TRUE(r->model.is_object());
  EXPECT_FALSE(r->model.at("outputs").at("pass").get<bool>());
}

// A verify of a model file that raises on import fails at stage "model" with the cause, and the
// runner serves the next job.
TEST_F(ModelJobRunnerTest, AVerifyOfAModelThatCannotBeLoadedFailsNamingTheCause) {
  make();
  protocol::Job j = verify_job("vb", nlohmann::json::array({tuned("matmul", {64, 192, 64})}));
  j.spec.model->model = "broken.py";
  j.spec.model->model_code = "import torch\nraise ImportError('no such layer')\n";
  start(j);
  auto r = wait("vb");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, ResultStatus::kFail);
  EXPECT_EQ(r->stage, "model");
  EXPECT_NE(r->reason.find("ImportError: no such layer"), std::string::npos) << r->reason;
}

}  // namespace
}  // namespace ak
