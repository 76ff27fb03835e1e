// The KernelBench runner with the real harness on the CPU: its fork server (one process per
// runner that imported torch, dynamo and inductor once; kernelbench/HARNESS.md, "Fork server")
// runs steps as a fresh process would, starts them in a fraction of Python's start-up, survives
// a step killed at its timeout or by a cancel, and a server that refuses leaves the runner on fresh
// processes.
#include "worker/kernelbench_runner.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "common/confine.h"
#include "common/process.h"
#include "kernelbench/bridge.h"
#include "kernelbench/harness_source.h"
#include "kernelbench/witness.h"

namespace ak {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

// The most a step forked from the server may take to start: milliseconds on an idle machine; what
// a fresh Python takes to import torch is seconds.
constexpr double kForkedStartS = 1.0;

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class KernelBenchRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("kb_runner_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  KernelBenchRunnerOptions options(bool fork_server, const std::string& python = AK_PYTHON) {
    KernelBenchRunnerOptions o;
    o.python = python;
    o.work_dir = (dir_ / "work").string();
    o.device = "cpu";
    o.fork_server = fork_server;
    return o;
  }

  static JobSpec job(const std::string& id, const std::string& mode, const std::string& candidate = "") {
    const std::string root = std::string(AK_SOURCE_DIR) + "/tests/kernelbench/";
    const std::string problem = candidate.empty() ? "2_Linear.py" : "1_Matmul.py";
    JobSpec j;
    j.job_id = id;
    KernelBenchTask t;
    t.mode = mode;
    t.level = 1;
    t.problem_id = candidate.empty() ? 2 : 1;
    t.problem_name = problem;
    t.problem_code = read_file(root + "problems/level1/" + problem);
    t.backend = "torch";
    t.num_correct_trials = 1;
    t.num_perf_trials = 3;
    t.strict = false;
    j.kernelbench = t;
    if (!candidate.empty()) j.source = read_file(root + "candidates/" + candidate);
    return j;
  }

  // A Python that runs `on_serve` (shell) first when started as the fork server (its arguments hold
  // --serve, after the interpreter's own options), then the real one.
  fs::path python_wrapper(const std::string& name, const std::string& on_serve) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << "#!/bin/sh\n"
                     << "case \" $* \" in *\" --serve \"*) " << on_serve << ";; esac\n"
                     << "exec '" << AK_PYTHON << "' \"$@\"\n";
    fs::permissions(p, fs::perms::owner_all);
    return p;
  }

  static double start_phase(const KernelBenchOutcome& out) {
    return out.kernelbench.at("baseline").at("phases_s").at("start").get<double>();
  }

  fs::path dir_;
};

TEST_F(KernelBenchRunnerTest, ForkServerRunsAStepAsAFreshProcessWouldAndStartsItWithoutPythonsStartUp) {
  KernelBenchRunner fresh(options(false));
  const auto a = fresh.run(job("fresh", "baseline"), 120s);
  ASSERT_EQ(a.status, ResultStatus::kPass) << a.reason;
  KernelBenchRunner served(options(true));
  const auto b = served.run(job("served-1", "baseline"), 120s);
  ASSERT_EQ(b.status, ResultStatus::kPass) << b.reason;
  const auto c = served.run(job("served-2", "baseline"), 120s);
  ASSERT_EQ(c.status, ResultStatus::kPass) << c.reason;
  // Starting Python and importing torch takes seconds; a fork, milliseconds (kForkedStartS allows
  // for a loaded 2-core machine), and a small fraction of the fresh start.
  EXPECT_GT(start_phase(a), 0.3) << a.kernelbench.dump();
  EXPECT_LT(start_phase(b), kForkedStartS) << b.kernelbench.dump();
  EXPECT_LT(start_phase(c), kForkedStartS) << c.kernelbench.dump();
  EXPECT_LT(start_phase(c), start_phase(a) / 3) << a.kernelbench.dump() << "\n" << c.kernelbench.dump();
  EXPECT_GT(b.m.latency_us, 0);
  EXPECT_EQ(b.kernelbench.at("baseline").at("ok"), true);
}

TEST_F(KernelBenchRunnerTest, AForkedStepKilledAtItsTimeoutOrByACancelLeavesTheServerServing) {
  KernelBenchRunner runner(options(true));
  // The hanging candidate runs past the job's timeout: its step's group is killed.
  const auto hung = runner.run(job("hangs", "candidate", "hangs.py"), 20s);
  EXPECT_EQ(hung.status, ResultStatus::kTimeout) << hung.reason;
  ASSERT_EQ(runner.run(job("after-timeout", "baseline"), 120s).status, ResultStatus::kPass);

  // A cancel while the hanging candidate runs: the step is killed, the job is CANCELLED.
  runner.claim("cancelled");
  auto done = std::async(std::launch::async, [&] { return runner.run(job("cancelled", "candidate", "hangs.py"), 300s); });
  // The candidate step has started once its request is written (the reference step comes first).
  const auto until = std::chrono::steady_clock::now() + 120s;
  bool started = false;
  while (!started && std::chrono::steady_clock::now() < until) {
    for (const auto& d : fs::directory_iterator(dir_ / "work" / "jobs"))
      if (d.path().filename().string().find("cancelled") != std::string::npos &&
          fs::exists(d.path() / "candidate.request.json"))
        started = true;
    if (!started) done.wait_for(50ms);  // returns at once if the job ended early
    if (done.wait_for(0ms) == std::future_status::ready) break;
  }
  ASSERT_TRUE(started) << "the candidate step never started";
  EXPECT_TRUE(runner.cancel("cancelled"));
  const auto out = done.get();
  EXPECT_EQ(out.status, ResultStatus::kCancelled) << out.reason;
  EXPECT_NE(out.reason.find("stopped in its candidate step"), std::string::npos) << out.reason;
  const auto after = runner.run(job("after-cancel", "baseline"), 120s);
  ASSERT_EQ(after.status, ResultStatus::kPass) << after.reason;
  EXPECT_LT(start_phase(after), kForkedStartS) << "the server did not survive: " << after.kernelbench.dump();
}

TEST_F(KernelBenchRunnerTest, AServerThatRefusesLeavesTheRunnerOnFreshProcessesAndImportNoiseIsNotARefusal) {
  // A Python whose fork server refuses, as one would with CUDA's driver already loaded.
  const fs::path python = python_wrapper("python-refusing", "echo 'refused for the test'; exit 3");
  KernelBenchRunner runner(options(true, python.string()));
  const auto out = runner.run(job("refused", "baseline"), 120s);
  ASSERT_EQ(out.status, ResultStatus::kPass) << out.reason;
  EXPECT_GT(start_phase(out), 0.3) << out.kernelbench.dump();  // a fresh Python

  // What an import prints before the server's "ready" is not its answer: the server is used.
  const fs::path noisy = python_wrapper("python-noisy", "echo 'a line some import printed'");
  KernelBenchRunner served(options(true, noisy.string()));
  const auto s = served.run(job("noisy", "baseline"), 120s);
  ASSERT_EQ(s.status, ResultStatus::kPass) << s.reason;
  EXPECT_LT(start_phase(s), kForkedStartS) << s.kernelbench.dump();
}

TEST_F(KernelBenchRunnerTest, AHangingCandidateInAFreshProcessEndsAtTheJobsTimeoutAsTimeoutNamingItsStep) {
  KernelBenchRunner runner(options(false));
  const auto t0 = std::chrono::steady_clock::now();
  // 40 s: two fresh Pythons importing torch (the reference step, then the candidate's) must fit
  // before it on a loaded machine for the timeout to fall in the candidate step.
  const auto out = runner.run(job("hangs-fresh", "candidate", "hangs.py"), 40s);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(out.status, ResultStatus::kTimeout) << out.reason;
  EXPECT_EQ(out.stage, "candidate");
  EXPECT_NE(out.reason.find("the candidate step did not finish within the job's 40000 ms"), std::string::npos)
      << out.reason;
  // The timeout covers the step: the job ends at it, not whenever the candidate would.
  EXPECT_LT(took, 40s + 15s);
}

TEST_F(KernelBenchRunnerTest, TheHarnessCopyIsNamedByTheHashOfItsBytesAndDeadProcessesCopiesAreSwept) {
  // A copy left by a process that is gone (a reaped child's pid) and one of this live process.
  auto gone = ChildProcess::spawn({"true"}, {});
  ASSERT_TRUE(gone.ok());
  const pid_t dead = gone->pid();
  gone->wait();
  // A folder of its own: the sweep runs once per folder in a process's life.
  KernelBenchRunnerOptions o = options(false);
  o.work_dir = (dir_ / "work-swept").string();
  fs::create_directories(o.work_dir);
  const fs::path stale = fs::path(o.work_dir) / ("harness-" + std::to_string(dead) + "-0123456789abcdef.pyz");
  const fs::path other = fs::path(o.work_dir) / ("harness-" + std::to_string(::getpid()) + "-0123456789abcdef.pyz");
  std::ofstream(stale) << "old";
  std::ofstream(other) << "another version of the same length as no other";

  KernelBenchRunner runner(o);
  ASSERT_EQ(runner.run(job("named", "baseline"), 120s).status, ResultStatus::kPass);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(other));  // a live process's copy stays
  const fs::path mine =
      fs::path(o.work_dir) / ("harness-" + std::to_string(::getpid()) + "-" +
                              kernelbench::xxh64_hex(std::string(kernelbench::kHarnessZipapp)) + ".pyz");
  ASSERT_TRUE(fs::exists(mine));
  EXPECT_EQ(read_file(mine), std::string(kernelbench::kHarnessZipapp));
}

}  // namespace
}  // namespace ak

namespace ak {
namespace {

// A KernelBench candidate that, at import, tries to read a file of the worker's, write into the
// worker's folder, reach a TCP port on 127.0.0.1 and signal the worker; it raises (the job fails,
// naming what worked) if anything worked, and is a correct matmul otherwise.
std::string escaping_candidate(const std::string& secret, const std::string& canary, int port) {
  return "import os, socket\n"
         "import torch\nimport torch.nn as nn\n"
         "done = []\n"
         "def attempt(name, fn):\n"
         "    try:\n        fn()\n        done.append(name)\n"
         "    except Exception:\n        pass\n"
         "attempt('read-secret', lambda: open('" +
         secret +
         "').read())\n"
         "attempt('write-canary', lambda: open('" +
         canary +
         "', 'w').write('x'))\n"
         "attempt('inet', lambda: socket.create_connection(('127.0.0.1', " +
         std::to_string(port) +
         "), timeout=2))\n"
         "attempt('signal-worker', lambda: os.kill(" +
         std::to_string(getpid()) +
         ", 0))\n"
         "if done:\n    raise RuntimeError('escaped: ' + ' '.join(done))\n"
         "class ModelNew(nn.Module):\n"
         "    def __init__(self):\n        super().__init__()\n"
         "    def forward(self, A, B):\n        return torch.matmul(A, B)\n";
}

TEST_F(KernelBenchRunnerTest, AConfinedStepCannotReadOrWriteTheWorkersFilesReachTheNetworkOrSignalTheWorker) {
  auto policy = make_confinement_policy(false, {(dir_ / "work").string()});
  if (!policy.ok()) GTEST_SKIP() << "no confinement here: " << policy.status().message();
  // What the candidate must not reach: a file in the worker's folder and a listener of the worker.
  fs::create_directories(dir_ / "work");
  const std::string secret = (dir_ / "work" / "secret").string();
  std::ofstream(secret) << "worker secret";
  const std::string canary = (dir_ / "work" / "canary").string();
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  socklen_t len = sizeof a;
  getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
  JobSpec j = job("escape", "candidate", "linear_correct.py");
  j.source = escaping_candidate(secret, canary, ntohs(a.sin_port));

  // Unconfined, everything works: the candidate says so, and the test could fail.
  KernelBenchRunner open_runner(options(false));
  const auto escaped = open_runner.run(j, 120s);
  EXPECT_NE(escaped.status, ResultStatus::kPass);
  EXPECT_NE((escaped.reason + escaped.kernelbench.dump()).find("escaped: read-secret write-canary inet signal-worker"),
            std::string::npos)
      << escaped.reason;
  fs::remove(canary);

  KernelBenchRunnerOptions o = options(false);
  o.confinement = *policy;
  KernelBenchRunner confined(o);
  const auto out = confined.run(j, 120s);
  EXPECT_EQ(out.status, ResultStatus::kPass) << out.reason << "\n" << out.kernelbench.dump();
  EXPECT_FALSE(fs::exists(canary));
  close(listener);
}

// The witness step (kernelbench/HARNESS.md, "witness") through the runner, as a worker runs it:
// fresh processes, confined where this host can confine.
KernelBenchRunnerOptions maybe_confined(KernelBenchRunnerOptions o, const fs::path& work) {
  auto policy = make_confinement_policy(false, {work.string()});
  if (policy.ok()) o.confinement = *policy;
  return o;
}

TEST_F(KernelBenchRunnerTest, AStrictCandidatePassesWitnessedAndItsSpeedupDividesTheWitnesssReferenceTime) {
  KernelBenchRunner runner(maybe_confined(options(false), dir_ / "work"));
  JobSpec j = job("honest", "candidate", "matmul_correct.py");
  j.kernelbench->strict = true;
  const auto out = runner.run(j, 240s);
  ASSERT_EQ(out.status, ResultStatus::kPass) << out.reason << "\n" << out.kernelbench.dump();
  const json& w = out.kernelbench.at("witness");
  EXPECT_EQ(w.at("verdict"), "pass") << w.dump();
  EXPECT_EQ(w.at("witnessed"), true);
  EXPECT_GT(w.at("outputs_checked").get<int>(), 0);
  // The reference time is the witness's own, not the figure the candidate's process reported.
  EXPECT_DOUBLE_EQ(out.m.baseline_us, w.at("ref_runtime_ms").get<double>() * 1000.0);
  // ... divided by the candidate's own time or the witness's estimate of it less 0.05 ms,
  // whichever is longer.
  const double counted = w.at("counted_ms").get<double>();
  EXPECT_GE(counted, out.kernelbench.at("runtime_ms").get<double>());
  EXPECT_GE(w.at("slack_ms").get<double>(), kernelbench::kWitnessSlackMs);
  EXPECT_GE(counted, w.at("estimate_ms").get<double>() - kernelbench::kWitnessSlackMs - 1e-12);
  EXPECT_DOUBLE_EQ(out.m.speedup, w.at("ref_runtime_ms").get<double>() / counted);
  EXPECT_DOUBLE_EQ(out.m.latency_us, counted * 1000.0);
}

TEST_F(KernelBenchRunnerTest, ACandidateThatRewritesItsClockOrKnowsThePublishedSeedsFailsAtTheWitness) {
  KernelBenchRunner runner(maybe_confined(options(false), dir_ / "work"));
  const struct {
    const char* candidate;
    const char* reason;
  } cases[] = {
      {"forges_its_clock.py", "is far below what the witness measured from outside its process"},
      // The same clock, and the job folder's problem rewritten so that a witness loading it from
      // there would find nothing to hand over: the witness loads the worker's own copy.
      {"rewrites_the_problem.py", "is far below what the witness measured from outside its process"},
      {"knows_the_seeds.py", "on inputs the candidate had not seen differ from the reference"},
  };
  for (const auto& c : cases) {
    JobSpec j = job(c.candidate, "candidate", c.candidate);
    j.kernelbench->strict = true;
    const auto out = runner.run(j, 240s);
    EXPECT_EQ(out.status, ResultStatus::kFail) << c.candidate << ": " << out.reason;
    EXPECT_EQ(out.stage, "witness") << c.candidate;
    EXPECT_NE(out.reason.find(c.reason), std::string::npos) << c.candidate << ": " << out.reason;
    EXPECT_EQ(out.kernelbench.at("verdict"), "correct") << c.candidate;  // what its own process said
    EXPECT_EQ(out.kernelbench.at("witness").at("verdict"), "fail") << c.candidate;
    // A figure the timing rule calls forged is witnessed twice before the job fails; wrong outputs
    // once.
    const bool by_timing = std::string(c.reason).find("far below") != std::string::npos;
    EXPECT_EQ(out.kernelbench.at("witness").value("attempts", 0), by_timing ? 2 : 1) << c.candidate;
    if (by_timing) {
      // Failed with the first attempt's reason; the second's outcome beside it.
      EXPECT_TRUE(out.kernelbench.at("witness").contains("second_attempt")) << c.candidate;
      EXPECT_NE(out.kernelbench.at("witness").at("second_attempt").value("reason", "").find(c.reason),
                std::string::npos)
          << c.candidate;
    }
  }
}

}  // namespace
}  // namespace ak
