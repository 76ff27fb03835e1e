#include "worker/supervisor.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace ak {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kPatience{10'000};  // bound for replies that must come

SandboxOptions fake_options(std::vector<std::string> extra = {}) {
  SandboxOptions o;
  o.executable = AK_FAKE_SANDBOX;
  o.backend = Backend::kCpu;
  o.device_index = 3;
  o.extra_args = std::move(extra);
  o.start_timeout = kPatience;
  o.exit_grace = milliseconds(5000);  // a dying child on a loaded machine still reaps as itself, not as "signal 9"
  return o;
}

SandboxRequest request(const std::string& mode, const std::string& id = "job-1") {
  SandboxRequest r;
  r.job.job_id = id;
  r.job.kernel_type = "softmax";
  r.artifact_path = "/nonexistent.so";
  r.entry = mode;
  r.compile_ms = 7.5;
  return r;
}

// True when `pid` is no longer our child (reaped) and no longer exists.
bool reaped(pid_t pid) {
  int st;
  return waitpid(pid, &st, WNOHANG) == -1 && errno == ECHILD && kill(pid, 0) == -1;
}

void expect_fresh_sandbox_works(SandboxSupervisor& sup, int64_t starts_before) {
  SandboxReply r = sup.run(request("pass", "after"), kPatience);
  EXPECT_EQ(r.status, ResultStatus::kPass) << r.reason;
  EXPECT_EQ(sup.starts(), starts_before + 1) << "a fresh sandbox was started";
}

TEST(SandboxSupervisor, SandboxGetsAScrubbedEnvironmentLimitsAndAPrivateTmpRemovedAfterwards) {
  setenv("AK_TEST_SECRET_TOKEN", "do-not-leak", 1);
  SandboxOptions o = fake_options();
  // The private folders win over extra_env's (worker --inherit-env passes HOME and TMPDIR along).
  o.extra_env = {"AK_EXTRA=1", "HOME=/root", "TMPDIR=/var/tmp", "CUDA_CACHE_PATH=/root/.nv"};
  std::string tmp;
  {
    SandboxSupervisor sup(o);
    SandboxReply r = sup.run(request("env"), kPatience);
    ASSERT_EQ(r.status, ResultStatus::kPass) << r.reason;
    auto j = nlohmann::json::parse(r.reason);
    std::map<std::string, std::string> env;
    for (const auto& e : j["env"]) {
      std::string s = e;
      env[s.substr(0, s.find('='))] = s.substr(s.find('=') + 1);
    }
    EXPECT_EQ(env.count("AK_TEST_SECRET_TOKEN"), 0u) << "the worker's environment leaked into the sandbox";
    EXPECT_EQ(env["AK_EXTRA"], "1");
    ASSERT_EQ(env.count("TMPDIR"), 1u);
    tmp = env["TMPDIR"];
    EXPECT_EQ(env["HOME"], tmp);
    EXPECT_EQ(env["CUDA_CACHE_PATH"], tmp);
    EXPECT_EQ(env["TRITON_CACHE_DIR"], tmp + "/triton");
    EXPECT_EQ(tmp, sup.tmp_dir());
    // Named by the worker's pid, so a later worker removes it if this one is killed.
    EXPECT_EQ(tmp.rfind("/tmp/ak-sandbox-" + std::to_string(getpid()) + "-", 0), 0u) << tmp;
    EXPECT_TRUE(j["tmp_writable"].get<bool>());
    EXPECT_TRUE(std::filesystem::exists(tmp + "/probe"));
    // The limits go to the sandbox, which applies them to itself: 16 GiB on cpu, 256 files.
    const auto argv = j["argv"].get<std::vector<std::string>>();
    auto value = [&](const std::string& flag) {
      auto it = std::find(argv.begin(), argv.end(), flag);
      return it == argv.end() || it + 1 == argv.end() ? std::string("missing") : *(it + 1);
    };
    EXPECT_EQ(value("--limit-as-mb"), "16384");
    EXPECT_EQ(value("--limit-nofile"), "256");
  }
  EXPECT_FALSE(std::filesystem::exists(tmp)) << "the sandbox's temporary directory outlived it";
  unsetenv("AK_TEST_SECRET_TOKEN");
}

TEST(SandboxSupervisor, ACrashedSandboxsTmpIsRemovedAndTheNextGetsAFreshOne) {
  SandboxSupervisor sup(fake_options());
  SandboxReply r = sup.run(request("env"), kPatience);
  ASSERT_EQ(r.status, ResultStatus::kPass) << r.reason;
  const std::string first = sup.tmp_dir();
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(sup.run(request("segv"), kPatience).status, ResultStatus::kCrash);
  EXPECT_FALSE(std::filesystem::exists(first));
  ASSERT_EQ(sup.run(request("env"), kPatience).status, ResultStatus::kPass);
  EXPECT_NE(sup.tmp_dir(), first);
  EXPECT_TRUE(std::filesystem::exists(sup.tmp_dir()));
}

TEST(SandboxSupervisor, HangsAndDeathsAreReportedWithTheStageTheSandboxWasIn) {
  SandboxSupervisor sup(fake_options());
  // Started first: the hang's timeout then covers the job alone, not the sandbox's start-up too.
  ASSERT_TRUE(sup.start().ok());
  SandboxReply r = sup.run(request("progress-hang"), milliseconds(1000));
  EXPECT_EQ(r.status, ResultStatus::kTimeout);
  EXPECT_EQ(r.stage, "verify.smoke");
  EXPECT_NE(r.reason.find("during verify.smoke"), std::string::npos) << r.reason;
  r = sup.run(request("progress-segv"), kPatience);
  EXPECT_EQ(r.status, ResultStatus::kCrash);
  EXPECT_EQ(r.stage, "verify.edge");
  EXPECT_NE(r.reason.find("signal 11"), std::string::npos) << r.reason;
  // without progress the stage stays "sandbox"
  r = sup.run(request("segv"), kPatience);
  EXPECT_EQ(r.stage, "sandbox");
  EXPECT_EQ(sup.run(request("pass"), kPatience).status, ResultStatus::kPass);
}

TEST(SandboxSupervisor, PassingRequestReturnsTheSandboxReply) {
  SandboxSupervisor sup(fake_options());
  SandboxReply r = sup.run(request("pass"), kPatience);
  EXPECT_EQ(r.status, ResultStatus::kPass) << r.reason;
  EXPECT_DOUBLE_EQ(r.m.latency_us, 1.5);
  EXPECT_DOUBLE_EQ(r.m.compile_ms, 7.5);
  EXPECT_NE(r.reason.find("backend=cpu device=3"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("job=job-1"), std::string::npos) << r.reason;
  EXPECT_EQ(sup.hello().device, "cpu");
  EXPECT_DOUBLE_EQ(sup.hello().copy_bandwidth_gbps, 12.5);
}

TEST(SandboxSupervisor, OneSandboxServesManyRequests) {
  SandboxSupervisor sup(fake_options());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(sup.run(request("pass"), kPatience).status, ResultStatus::kPass);
  EXPECT_EQ(sup.starts(), 1);
}

TEST(SandboxSupervisor, HangBecomesTimeoutAndTheSandboxIsKilledAndReaped) {
  SandboxSupervisor sup(fake_options());
  ASSERT_TRUE(sup.start().ok());
  pid_t old = sup.pid();
  SandboxReply r = sup.run(request("hang"), milliseconds(200));
  EXPECT_EQ(r.status, ResultStatus::kTimeout);
  EXPECT_EQ(r.stage, "sandbox");
  EXPECT_EQ(r.reason, "no reply within 200 ms; sandbox killed");
  EXPECT_FALSE(sup.running());
  EXPECT_TRUE(reaped(old));
  expect_fresh_sandbox_works(sup, 1);
}

TEST(SandboxSupervisor, SegfaultBecomesCrashNamingTheSignal) {
  SandboxSupervisor sup(fake_options());
  ASSERT_TRUE(sup.start().ok());
  pid_t old = sup.pid();
  SandboxReply r = sup.run(request("segv"), kPatience);
  EXPECT_EQ(r.status, ResultStatus::kCrash);
  EXPECT_EQ(r.stage, "sandbox");
  EXPECT_EQ(r.reason, "sandbox died with signal 11 (Segmentation fault)");
  EXPECT_TRUE(reaped(old));
  expect_fresh_sandbox_works(sup, 1);
}

TEST(SandboxSupervisor, ExitBecomesCrashNamingTheExitCode) {
  SandboxSupervisor sup(fake_options());
  SandboxReply r = sup.run(request("exit3"), kPatience);
  EXPECT_EQ(r.status, ResultStatus::kCrash);
  EXPECT_EQ(r.reason, "sandbox exited with code 3");
  expect_fresh_sandbox_works(sup, 1);
}

TEST(SandboxSupervisor, GarbageReplyIsAProtocolViolationAndRestartsTheSandbox) {
  SandboxSupervisor sup(fake_options());
  ASSERT_TRUE(sup.start().ok());
  pid_t old = sup.pid();
  SandboxReply r = sup.run(request("garbage"), kPatience);
  EXPECT_EQ(r.status, ResultStatus::kCrash);
  EXPECT_NE(r.reason.find("protocol violation"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("this is not json"), std::string::npos) << r.reason;
  EXPECT_TRUE(reaped(old));
  expect_fresh_sandbox_works(sup, 1);
}

TEST(SandboxSupervisor, SandboxThatClosesStdoutButLivesIsKilledAfterTheGrace) {
  SandboxOptions o = fake_options();
  o.exit_grace = milliseconds(200);  // the grace is what this waits out
  SandboxSupervisor sup(o);
  ASSERT_TRUE(sup.start().ok());
  pid_t old = sup.pid();
  SandboxReply r = sup.run(request("close"), kPatience);
  EXPECT_EQ(r.status, ResultStatus::kCrash);
  EXPECT_EQ(r.reason, "sandbox died with signal 9 (Killed)");
  EXPECT_TRUE(reaped(old));
  expect_fresh_sandbox_works(sup, 1);
}

TEST(SandboxSupervisor, CrashReplyIsReturnedAndTheExitingSandboxIsReplaced) {
  SandboxSupervisor sup(fake_options());
  ASSERT_TRUE(sup.start().ok());
  pid_t old = sup.pid();
  SandboxReply r = sup.run(request("crash"), kPatience);
  EXPECT_EQ(r.status, ResultStatus::kCrash);
  EXPECT_EQ(r.stage, "verify");
  EXPECT_EQ(r.reason, "CUDA_ERROR_ILLEGAL_ADDRESS (fake)");
  EXPECT_TRUE(reaped(old));
  expect_fresh_sandbox_works(sup, 1);
}

TEST(SandboxSupervisor, SandboxThatDiedBetweenJobsDoesNotFailTheNextJob) {
  SandboxSupervisor sup(fake_options());
  EXPECT_EQ(sup.run(request("quit"), kPatience).status, ResultStatus::kPass);
  // The child exits after its reply; whether or not it is gone yet, the next job must pass.
  expect_fresh_sandbox_works(sup, 1);
}

TEST(SandboxSupervisor, MissingExecutableFailsToStartWithItsPath) {
  SandboxOptions o = fake_options();
  o.executable = "/nonexistent/autokernel-sandbox";
  SandboxSupervisor sup(o);
  Status s = sup.start();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("/nonexistent/autokernel-sandbox"), std::string::npos) << s.message();
  SandboxReply r = sup.run(request("pass"), kPatience);
  EXPECT_EQ(r.status, ResultStatus::kCrash);
  EXPECT_NE(r.reason.find("could not be started"), std::string::npos) << r.reason;
}

TEST(SandboxSupervisor, NoHelloWithinTheStartTimeoutFailsAndKillsTheChild) {
  SandboxOptions o = fake_options({"--hello", "never"});
  o.start_timeout = milliseconds(200);
  SandboxSupervisor sup(o);
  Status s = sup.start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no hello within 200 ms"), std::string::npos) << s.message();
  EXPECT_FALSE(sup.running());
}

TEST(SandboxSupervisor, NotReadyHelloFailsWithTheSandboxsError) {
  SandboxSupervisor sup(fake_options({"--hello", "not-ready"}));
  Status s = sup.start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no GPU (fake)"), std::string::npos) << s.message();
  EXPECT_FALSE(sup.running());
}

TEST(SandboxSupervisor, UnreadableHelloFailsToStart) {
  SandboxSupervisor sup(fake_options({"--hello", "garbage"}));
  Status s = sup.start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("hello?"), std::string::npos) << s.message();
  EXPECT_FALSE(sup.running());
}

TEST(SandboxSupervisor, DestructorStopsAndReapsTheSandbox) {
  pid_t pid;
  {
    SandboxSupervisor sup(fake_options());
    ASSERT_TRUE(sup.start().ok());
    pid = sup.pid();
    ASSERT_GT(pid, 0);
  }
  EXPECT_TRUE(reaped(pid));
}

TEST(SandboxSupervisor, SandboxStderrGoesToTheLogFile) {
  std::string dir_template = (std::filesystem::temp_directory_path() / "ak-sup-XXXXXX").string();
  std::string dir = mkdtemp(dir_template.data());
  SandboxOptions o = fake_options();
  o.stderr_path = dir + "/sandbox.log";
  {
    SandboxSupervisor sup(o);
    ASSERT_TRUE(sup.start().ok());
  }
  std::ifstream in(o.stderr_path);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_NE(ss.str().find("fake sandbox log line"), std::string::npos) << ss.str();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ak
