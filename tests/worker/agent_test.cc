// WorkerAgent against a real ZeroMQ ROUTER socket acting as the coordinator, with a fake compiler
// and a fake sandbox runner. Time is a FakeClock: heartbeats and resends happen only when a test
// advances it. Every wait is for a message or an event, bounded by kPatience.
#include "worker/agent.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>
#include <zmq.hpp>

#include "tests/worker/worker_fakes.h"

namespace ak {
namespace {

using std::chrono::milliseconds;

using fakes::Events;
using fakes::FakeCompiler;
using fakes::FakeJobRunner;
using fakes::FakeSandbox;
using fakes::kPatience;

struct Received {
  std::string identity;
  protocol::Message message;
};

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    router_.set(zmq::sockopt::linger, 0);
    router_.bind("tcp://127.0.0.1:*");
    endpoint_ = router_.get(zmq::sockopt::last_endpoint);
    options_.coordinator_endpoint = endpoint_;
    options_.worker_id = "host-cpu0";
    options_.slots = 3;
    options_.heartbeat_ms = 500;
    options_.resend_ms = 2000;
    options_.poll_ms = 5;
    options_.linger_ms = 1000;  // DISCONNECT must get out before the socket closes
    caps_.hostname = "host";
    caps_.gpu_name = "NVIDIA H200";
    caps_.arch = "sm_90a";
    caps_.pci_id = "0000:19:00.0";
    caps_.sm_count = 132;
    caps_.memory_bytes = int64_t{150} << 30;
    caps_.backends = {Backend::kCuda};
  }
  void TearDown() override {
    if (compiler_) compiler_->gate().release();
    if (runner_) runner_->release();
    stop_agent();
  }

  // With `sandbox`, jobs run through that runner instead of the FakeSandbox.
  void start_agent(std::unique_ptr<SandboxRunner> sandbox = nullptr) {
    auto compiler = std::make_unique<FakeCompiler>(events_);
    compiler_ = compiler.get();
    for (const auto& id : compile_blocked_) compiler->gate().block(id);
    auto runner = std::make_unique<FakeSandbox>(events_);
    runner_ = runner.get();
    for (const auto& id : blocked_) runner->block(id);
    if (sandbox) {
      spare_runner_ = std::move(runner);
      agent_ = std::make_unique<WorkerAgent>(options_, caps_, clock_, std::move(compiler), std::move(sandbox));
    } else {
      agent_ = std::make_unique<WorkerAgent>(options_, caps_, clock_, std::move(compiler), std::move(runner));
    }
    serve();
  }
  // Jobs run through `runners` instead of the standard ones.
  void start_agent(std::vector<std::unique_ptr<JobRunner>> runners) {
    runner_ = nullptr;
    compiler_ = nullptr;
    agent_ = std::make_unique<WorkerAgent>(options_, caps_, clock_, std::move(runners));
    serve();
  }
  void serve() {
    stop_ = false;
    thread_ = std::thread([this] { run_status_ = agent_->run(stop_); });
  }
  void stop_agent() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    agent_.reset();
    compiler_ = nullptr;  // owned by the agent
    runner_ = nullptr;
  }

  std::optional<Received> recv(milliseconds timeout = kPatience) {
    zmq::pollitem_t item{router_.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, timeout) <= 0) return std::nullopt;
    zmq::message_t id, body;
    EXPECT_TRUE(router_.recv(id));
    EXPECT_TRUE(router_.recv(body));
    auto d = protocol::decode(body.to_string_view());
    EXPECT_TRUE(d.ok()) << d.error.message;
    if (!d.ok()) return std::nullopt;
    log_.push_back(*d.message);
    return Received{id.to_string(), *d.message};
  }
  // The next message of type T; messages of other types are skipped (they stay in log_).
  template <typename T>
  T next() {
    for (;;) {
      auto r = recv();
      if (!r) {
        ADD_FAILURE() << "no " << typeid(T).name() << " within " << kPatience.count() << " ms";
        return T{};
      }
      if (auto* m = std::get_if<T>(&r->message)) return *m;
    }
  }
  protocol::ResultMsg next_result_for(const std::string& job_id) {
    for (int i = 0; i < 100; ++i) {
      auto r = next<protocol::ResultMsg>();
      if (r.result.job_id == job_id || r.result.job_id.empty()) return r;
    }
    ADD_FAILURE() << "no RESULT for " << job_id;
    return {};
  }
  void send(const protocol::Message& m) {
    router_.send(zmq::buffer(options_.worker_id), zmq::send_flags::sndmore);
    router_.send(zmq::buffer(protocol::encode(m)));
  }
  void send_job(const std::string& id, const std::string& source = "ok", int attempt = 1,
                int64_t timeout_ms = 30'000) {
    protocol::Job j;
    j.spec.job_id = id;
    j.spec.kernel_type = "softmax";
    j.spec.source = source;
    j.spec.timeout_ms = timeout_ms;
    j.attempt = attempt;
    j.lease_ms = 10'000;
    send(j);
  }
  // Starts the agent and consumes its READY.
  protocol::Ready start_and_register() {
    start_agent();
    return next<protocol::Ready>();
  }
  int results_in_log_for(const std::string& job_id) const {
    int n = 0;
    for (const auto& m : log_)
      if (auto* r = std::get_if<protocol::ResultMsg>(&m); r && r->result.job_id == job_id) ++n;
    return n;
  }

  zmq::context_t ctx_{1};
  zmq::socket_t router_{ctx_, zmq::socket_type::router};
  std::string endpoint_;
  WorkerOptions options_;
  Capabilities caps_;
  FakeClock clock_;
  Events events_;
  std::set<std::string> blocked_;          // held in the sandbox until runner_->release()
  std::set<std::string> compile_blocked_;  // held in the compiler until compiler_->gate().release()
  FakeCompiler* compiler_ = nullptr;
  FakeSandbox* runner_ = nullptr;
  std::unique_ptr<FakeSandbox> spare_runner_;  // unused when a real supervisor runs the jobs
  std::unique_ptr<WorkerAgent> agent_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  Status run_status_;
  std::vector<protocol::Message> log_;
};

TEST_F(AgentTest, RegistersWithReadyCarryingCapabilitiesAndSlots) {
  start_agent();
  auto r = recv();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->identity, "host-cpu0") << "routing id is the worker id";
  auto* ready = std::get_if<protocol::Ready>(&r->message);
  ASSERT_NE(ready, nullptr) << "first message is READY, got " << protocol::type_name(r->message);
  EXPECT_EQ(ready->worker_id, "host-cpu0");
  EXPECT_EQ(ready->slots, 3);
  EXPECT_EQ(ready->caps.gpu_name, "NVIDIA H200");
  EXPECT_EQ(ready->caps.arch, "sm_90a");
  EXPECT_EQ(ready->caps.pci_id, "0000:19:00.0");
  EXPECT_EQ(ready->caps.sm_count, 132);
  EXPECT_EQ(ready->caps.memory_bytes, int64_t{150} << 30);
}

TEST_F(AgentTest, JobProducesResultWithWorkerFieldsFilledIn) {
  start_and_register();
  send_job("j1", "ok", 2);
  auto msg = next<protocol::ResultMsg>();
  const ResultRecord& r = msg.result;
  EXPECT_EQ(msg.worker_id, "host-cpu0");
  EXPECT_EQ(r.job_id, "j1");
  EXPECT_EQ(r.attempt, 2);
  EXPECT_EQ(r.status, ResultStatus::kPass) << r.reason;
  EXPECT_EQ(r.worker_id, "host-cpu0");
  EXPECT_EQ(r.gpu, "NVIDIA H200");
  EXPECT_EQ(r.source_hash, "src-j1");
  EXPECT_EQ(r.options_hash, "opt-j1");
  EXPECT_DOUBLE_EQ(r.m.compile_ms, 12.5);
  EXPECT_DOUBLE_EQ(r.m.latency_us, 4.0);
  EXPECT_EQ(r.completed_wall_ms, clock_.wall_ms());
  EXPECT_EQ(r.reason, "/cache/j1.so softmax_sm_90a timeout 30000") << "the runner got the artefact and the job timeout";
}

TEST_F(AgentTest, CompileErrorBecomesCompileErrorResultWithoutTouchingTheSandbox) {
  start_and_register();
  send_job("bad1", "bad");
  auto r = next<protocol::ResultMsg>().result;
  EXPECT_EQ(r.status, ResultStatus::kCompileError);
  EXPECT_EQ(r.stage, "compile");
  EXPECT_NE(r.reason.find("expected a ';'"), std::string::npos) << r.reason;
  EXPECT_EQ(r.source_hash.size(), 16u) << "xxh64 of the source, hex";
  EXPECT_EQ(events_.count("running bad1"), 0);
}

TEST_F(AgentTest, ThrowingCompilerOrRunnerBecomesCrashAndTheAgentKeepsServing) {
  start_and_register();
  send_job("t1", "throw");
  auto r1 = next<protocol::ResultMsg>().result;
  EXPECT_EQ(r1.job_id, "t1");
  EXPECT_EQ(r1.status, ResultStatus::kCrash);
  EXPECT_NE(r1.reason.find("compiler exploded"), std::string::npos) << r1.reason;
  send_job("t2", "throw-in-sandbox");
  auto r2 = next<protocol::ResultMsg>().result;
  EXPECT_EQ(r2.job_id, "t2");
  EXPECT_EQ(r2.status, ResultStatus::kCrash);
  EXPECT_EQ(r2.stage, "sandbox");
  EXPECT_NE(r2.reason.find("runner exploded"), std::string::npos) << r2.reason;
  send_job("t3");
  EXPECT_EQ(next<protocol::ResultMsg>().result.status, ResultStatus::kPass);
}

TEST_F(AgentTest, UnacknowledgedResultIsResentAfterTheResendInterval) {
  start_and_register();
  send_job("j1");
  EXPECT_EQ(next<protocol::ResultMsg>().result.job_id, "j1");
  clock_.advance(milliseconds(options_.resend_ms));
  auto again = next<protocol::ResultMsg>();
  EXPECT_EQ(again.result.job_id, "j1");
  EXPECT_EQ(again.result.attempt, 1);
}

TEST_F(AgentTest, AckStopsResends) {
  start_and_register();
  send_job("j1");
  EXPECT_EQ(next<protocol::ResultMsg>().result.job_id, "j1");
  send(protocol::Ack{"j1", 1});
  // Messages are handled in order: once j2's result arrives, the ACK of j1 has been handled.
  send_job("j2");
  EXPECT_EQ(next_result_for("j2").result.job_id, "j2");
  send(protocol::Ack{"j2", 1});
  send_job("j3");
  EXPECT_EQ(next_result_for("j3").result.job_id, "j3");
  const int before = results_in_log_for("j1");
  // Resends go out before the heartbeat of the same moment, so a resend would precede it.
  clock_.advance(milliseconds(options_.resend_ms * 4));
  next<protocol::Heartbeat>();
  EXPECT_EQ(results_in_log_for("j1"), before) << "j1 was acknowledged and must not be resent";
  EXPECT_GT(results_in_log_for("j3"), 1) << "unacknowledged j3 is resent in the same round";
}

TEST_F(AgentTest, UnknownWorkerErrorMakesTheAgentRegisterAgainAndResendItsOutbox) {
  start_and_register();
  send_job("j1");
  EXPECT_EQ(next<protocol::ResultMsg>().result.job_id, "j1");
  // One re-registration per heartbeat interval; let one pass since the first READY.
  clock_.advance(milliseconds(options_.heartbeat_ms));
  next<protocol::Heartbeat>();
  send(protocol::Error{protocol::ErrorCode::kUnknownWorker, "worker host-cpu0 is not registered"});
  auto ready = next<protocol::Ready>();
  EXPECT_EQ(ready.worker_id, "host-cpu0");
  EXPECT_EQ(ready.caps.gpu_name, "NVIDIA H200");
  auto resent = next<protocol::ResultMsg>();
  EXPECT_EQ(resent.result.job_id, "j1") << "resent at once, without waiting for the resend interval";
}

TEST_F(AgentTest, HeartbeatListsRunningAndPrefetchedJobsButNotFinishedOnes) {
  blocked_ = {"run"};
  options_.resend_ms = 600'000;
  start_and_register();
  send_job("done");
  EXPECT_EQ(next<protocol::ResultMsg>().result.job_id, "done");
  send_job("run");
  send_job("next", "ok", 4);
  ASSERT_TRUE(events_.wait_for("running run"));
  ASSERT_TRUE(events_.wait_for("compiled next"));
  clock_.advance(milliseconds(options_.heartbeat_ms));
  auto hb = next<protocol::Heartbeat>();
  EXPECT_EQ(hb.worker_id, "host-cpu0");
  std::map<std::string, int> listed;
  for (const auto& f : hb.in_flight) listed[f.job_id] = f.attempt;
  EXPECT_EQ(listed, (std::map<std::string, int>{{"next", 4}, {"run", 1}}));
  runner_->release();
  next_result_for("run");
  next_result_for("next");
  clock_.advance(milliseconds(options_.heartbeat_ms));
  EXPECT_TRUE(next<protocol::Heartbeat>().in_flight.empty()) << "finished jobs are no longer held";
}

TEST_F(AgentTest, CompilingTheNextJobOverlapsRunningTheCurrentOne) {
  blocked_ = {"a"};
  start_and_register();
  send_job("a");
  send_job("b");
  ASSERT_TRUE(events_.wait_for("running a"));
  // The runner is still blocked inside job a: b can only have been compiled concurrently.
  ASSERT_TRUE(events_.wait_for("compiled b"));
  EXPECT_EQ(events_.count("ran a"), 0);
  EXPECT_EQ(events_.count("running b"), 0) << "measurement is serialised";
  runner_->release();
  EXPECT_EQ(next<protocol::ResultMsg>().result.job_id, "a");
  EXPECT_EQ(next<protocol::ResultMsg>().result.job_id, "b");
}

TEST_F(AgentTest, ACancelledJobThatWaitsIsNeverMeasuredAndOneBeingMeasuredFinishes) {
  blocked_ = {"a"};
  start_and_register();
  send_job("a");
  send_job("b");
  send_job("next");
  ASSERT_TRUE(events_.wait_for("running a"));
  // One compile thread: once it compiles the next job, b waits for the sandbox behind a.
  ASSERT_TRUE(events_.wait_for("compiling next"));
  send(protocol::CancelJob{"b", 1});
  const auto b = next_result_for("b");
  EXPECT_EQ(b.result.status, ResultStatus::kCancelled);
  EXPECT_EQ(b.result.stage, "worker");
  send(protocol::CancelJob{"a", 1});  // in the sandbox: it finishes and reports as usual
  send(protocol::CancelJob{"a", 1});  // a repeat changes nothing
  runner_->release();
  EXPECT_EQ(next_result_for("a").result.status, ResultStatus::kPass);
  EXPECT_EQ(events_.count("running b"), 0) << "a cancelled job is never measured";
  send_job("c");
  EXPECT_EQ(next_result_for("c").result.status, ResultStatus::kPass);
}

TEST_F(AgentTest, AJobCancelledWhileCompilingIsNeverMeasured) {
  compile_blocked_ = {"c"};
  options_.compile_threads = 2;
  start_and_register();
  send_job("c");
  ASSERT_TRUE(events_.wait_for("compiling c"));
  send(protocol::CancelJob{"c", 1});
  send_job("barrier");  // handled after the cancel, compiled by the other thread while c compiles
  EXPECT_EQ(next_result_for("barrier").result.status, ResultStatus::kPass);
  compiler_->gate().release();
  const auto c = next_result_for("c").result;
  EXPECT_EQ(c.status, ResultStatus::kCancelled);
  EXPECT_EQ(c.stage, "compile");
  EXPECT_EQ(events_.count("running c"), 0);
}

TEST_F(AgentTest, DuplicateDeliveryOfAHeldOrFinishedJobIsIgnored) {
  blocked_ = {"a"};
  start_and_register();
  send_job("a");
  send_job("a");  // while held
  ASSERT_TRUE(events_.wait_for("running a"));
  runner_->release();
  EXPECT_EQ(next_result_for("a").result.job_id, "a");
  send_job("a");  // while its result waits for an ACK
  send_job("a", "ok", 2);  // a new attempt is a new delivery
  auto second = next_result_for("a");
  EXPECT_EQ(second.result.attempt, 2);
  send_job("c");
  next_result_for("c");
  EXPECT_EQ(events_.count("compiled a"), 2) << "attempt 1 once, attempt 2 once";
}

TEST_F(AgentTest, CleanStopSendsDisconnect) {
  start_and_register();
  stop_ = true;
  auto d = next<protocol::Disconnect>();
  EXPECT_EQ(d.worker_id, "host-cpu0");
  thread_.join();
  EXPECT_TRUE(run_status_.ok()) << run_status_.to_string();
}

TEST_F(AgentTest, AnAgentRefusedItsIdForItsOwnInstanceStopsWithTheReasonAndNoDisconnect) {
  const protocol::Ready ready = start_and_register();
  ASSERT_FALSE(ready.instance.empty());
  // A refusal of another instance was meant for the other worker under this id.
  send(protocol::Error{protocol::ErrorCode::kWorkerIdInUse, "held by a live worker", "not-" + ready.instance});
  send_job("after");  // handled after the refusal: the agent still serves
  EXPECT_EQ(next<protocol::ResultMsg>().instance, ready.instance);
  send(protocol::Error{protocol::ErrorCode::kWorkerIdInUse, "held by a live worker (instance 1234)", ready.instance});
  thread_.join();
  EXPECT_EQ(run_status_.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(run_status_.message().find("held by a live worker (instance 1234)"), std::string::npos)
      << run_status_.message();
  while (recv(milliseconds(200))) {}
  for (const auto& m : log_) EXPECT_FALSE(std::holds_alternative<protocol::Disconnect>(m));
}

TEST_F(AgentTest, RestartedAgentResendsUnacknowledgedResultsFromItsStateDirectory) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "ak-agent-XXXXXX").string();
  options_.state_dir = mkdtemp(tmpl.data());
  start_and_register();
  send_job("kept");
  EXPECT_EQ(next<protocol::ResultMsg>().result.job_id, "kept");
  send_job("acked");
  EXPECT_EQ(next_result_for("acked").result.job_id, "acked");
  send(protocol::Ack{"acked", 1});
  send_job("barrier");  // handled after the ACK
  next_result_for("barrier");
  stop_agent();
  next<protocol::Disconnect>();
  log_.clear();

  start_and_register();
  auto resent = next<protocol::ResultMsg>();
  EXPECT_EQ(resent.result.job_id, "kept");
  EXPECT_EQ(events_.count("compiled kept"), 1) << "resent from the outbox, not recomputed";
  clock_.advance(milliseconds(options_.heartbeat_ms));
  next<protocol::Heartbeat>();
  EXPECT_EQ(results_in_log_for("acked"), 0) << "an acknowledged result is not resent after a restart";
  std::filesystem::remove_all(options_.state_dir);
}

TEST_F(AgentTest, HangingOrCrashingCandidateInARealSandboxIsReportedAndTheWorkerKeepsServing) {
  SandboxOptions so;
  so.executable = AK_FAKE_SANDBOX;
  so.start_timeout = kPatience;
  so.exit_grace = milliseconds(5000);  // the crash is reported as its own signal, not a kill at the grace
  start_agent(std::make_unique<SandboxSupervisor>(so));
  next<protocol::Ready>();
  send_job("hang", "mode:hang", 1, 200);
  auto hung = next_result_for("hang").result;
  EXPECT_EQ(hung.status, ResultStatus::kTimeout);
  EXPECT_EQ(hung.reason, "no reply within 200 ms; sandbox killed");
  send_job("segv", "mode:segv");
  auto crashed = next_result_for("segv").result;
  EXPECT_EQ(crashed.status, ResultStatus::kCrash);
  EXPECT_EQ(crashed.reason, "sandbox died with signal 11 (Segmentation fault)");
  send_job("fine", "mode:pass");
  auto fine = next_result_for("fine").result;
  EXPECT_EQ(fine.status, ResultStatus::kPass) << fine.reason;
  EXPECT_DOUBLE_EQ(fine.m.latency_us, 1.5);
  EXPECT_DOUBLE_EQ(fine.m.compile_ms, 12.5);
}

TEST_F(AgentTest, InvalidEndpointIsReportedWithoutServing) {
  options_.coordinator_endpoint = "not-an-endpoint";
  start_agent();
  thread_.join();
  EXPECT_FALSE(run_status_.ok());
  EXPECT_NE(run_status_.message().find("not-an-endpoint"), std::string::npos) << run_status_.message();
}

// The agent's one queue with runners of two kinds ("kb" and "sb", fake JobRunners): a job whose
// kind is the kernel_type.
class AgentRunnersTest : public AgentTest {
 protected:
  void start_with(int kb_slots, int sb_slots, bool kb_exclusive = false) {
    auto kb = std::make_unique<FakeJobRunner>(events_, "kb", kb_slots, kb_exclusive);
    auto sb = std::make_unique<FakeJobRunner>(events_, "sb", sb_slots);
    kb_ = kb.get();
    sb_ = sb.get();
    std::vector<std::unique_ptr<JobRunner>> runners;
    runners.push_back(std::move(kb));
    runners.push_back(std::move(sb));
    start_agent(std::move(runners));
  }
  void send_kind(const std::string& kind, const std::string& id) {
    protocol::Job j;
    j.spec.job_id = id;
    j.spec.kernel_type = kind;
    j.spec.source = "source of " + id;
    j.attempt = 1;
    j.lease_ms = 10'000;
    send(j);
  }
  static ResultRecord passed(double latency_us) {
    ResultRecord r;
    r.status = ResultStatus::kPass;
    r.stage = "measure";
    r.m.latency_us = latency_us;
    return r;
  }
  std::map<std::string, int> heartbeat_lists() {
    clock_.advance(milliseconds(options_.heartbeat_ms));
    std::map<std::string, int> listed;
    for (const auto& f : next<protocol::Heartbeat>().in_flight) listed[f.job_id] = f.attempt;
    return listed;
  }
  // The heartbeats until one lists `expected` (at most `beats`): jobs sent just before may reach
  // the agent after its next tick, and each heartbeat is a message to wait for, not a sleep.
  std::map<std::string, int> heartbeat_lists_once(const std::map<std::string, int>& expected, int beats = 20) {
    std::map<std::string, int> listed;
    for (int i = 0; i < beats && listed != expected; ++i) listed = heartbeat_lists();
    return listed;
  }

  FakeJobRunner* kb_ = nullptr;
  FakeJobRunner* sb_ = nullptr;
};

TEST_F(AgentRunnersTest, JobsOfTwoKindsShareOneQueueAndAKindWaitsOnlyForItsOwnRunnersSlots) {
  options_.slots = 3;
  start_with(1, 2);
  EXPECT_EQ(next<protocol::Ready>().slots, 3);
  send_kind("kb", "kb1");
  send_kind("kb", "kb2");  // the kb runner's one slot is taken: it waits in the queue
  send_kind("sb", "sb1");  // behind it, and starts at once: its runner has a free slot
  ASSERT_TRUE(events_.wait_for("sb started sb1"));
  EXPECT_EQ(events_.count("kb started kb1"), 1);
  EXPECT_EQ(events_.count("kb started kb2"), 0);
  EXPECT_EQ(heartbeat_lists(), (std::map<std::string, int>{{"kb1", 1}, {"kb2", 1}, {"sb1", 1}}))
      << "a queued job is held, and its lease renewed, like a running one";
  kb_->end("kb1", passed(1.0));
  EXPECT_EQ(next_result_for("kb1").result.status, ResultStatus::kPass);
  ASSERT_TRUE(events_.wait_for("kb started kb2")) << "the slot kb1 freed goes to the next kb job";
  sb_->end("sb1", passed(2.0));
  kb_->end("kb2", passed(3.0));
  next_result_for("sb1");
  next_result_for("kb2");
  EXPECT_TRUE(heartbeat_lists().empty());
}

TEST_F(AgentRunnersTest, AnExclusiveJobWaitsForTheDeviceToEmptyAndRunsAlone) {
  options_.slots = 3;
  start_with(1, 2, /*kb_exclusive=*/true);
  next<protocol::Ready>();
  send_kind("sb", "sb1");
  ASSERT_TRUE(events_.wait_for("sb started sb1"));
  send_kind("kb", "kb1");  // exclusive: waits for sb1
  send_kind("sb", "sb2");  // queued after it: waits for it, although sb has a free slot
  const std::map<std::string, int> all_three{{"sb1", 1}, {"kb1", 1}, {"sb2", 1}};
  EXPECT_EQ(heartbeat_lists_once(all_three), all_three);
  EXPECT_EQ(events_.count("kb started kb1"), 0);
  EXPECT_EQ(events_.count("sb started sb2"), 0);
  sb_->end("sb1", passed(1.0));
  next_result_for("sb1");
  ASSERT_TRUE(events_.wait_for("kb started kb1"));
  EXPECT_EQ(events_.count("sb started sb2"), 0) << "nothing starts beside an exclusive job";
  kb_->end("kb1", passed(2.0));
  next_result_for("kb1");
  ASSERT_TRUE(events_.wait_for("sb started sb2"));
  sb_->end("sb2", passed(3.0));
  next_result_for("sb2");
}

TEST_F(AgentRunnersTest, TheSlotsAnnouncedAreAtLeastEachRunnersSlots) {
  options_.slots = 1;
  start_with(1, 4);
  EXPECT_EQ(next<protocol::Ready>().slots, 4);
}

TEST_F(AgentRunnersTest, ACancelReachesTheRunnerThatHoldsTheJobAndAQueuedJobEndsCancelledAtOnce) {
  options_.slots = 3;
  start_with(1, 2);
  next<protocol::Ready>();
  send_kind("kb", "kb1");
  send_kind("kb", "kb2");
  send_kind("sb", "sb1");
  ASSERT_TRUE(events_.wait_for("sb started sb1"));
  send(protocol::CancelJob{"sb1", 1});
  ASSERT_TRUE(events_.wait_for("sb cancel sb1"));
  EXPECT_EQ(events_.count("kb cancel sb1"), 0);
  send(protocol::CancelJob{"kb2", 1});  // still queued: no runner holds it
  const auto kb2 = next_result_for("kb2").result;
  EXPECT_EQ(kb2.status, ResultStatus::kCancelled);
  EXPECT_EQ(kb2.stage, "worker");
  EXPECT_EQ(kb2.worker_id, "host-cpu0");
  EXPECT_EQ(events_.count("kb cancel kb2"), 0);
  kb_->end("kb1", passed(1.0));
  next_result_for("kb1");
  EXPECT_EQ(heartbeat_lists(), (std::map<std::string, int>{{"sb1", 1}}));
  EXPECT_EQ(events_.count("kb started kb2"), 0) << "a cancelled job is never started";
}

TEST_F(AgentRunnersTest, ARunnersResultIsCompletedByTheAgentAndKeptInTheOutboxUntilAcknowledged) {
  start_with(1, 1);
  next<protocol::Ready>();
  send_kind("sb", "sb1");
  ASSERT_TRUE(events_.wait_for("sb started sb1"));
  ResultRecord partial = passed(7.0);
  partial.options_hash = "opt";
  sb_->end("sb1", partial);
  const auto msg = next_result_for("sb1");
  const ResultRecord& r = msg.result;
  EXPECT_EQ(msg.worker_id, "host-cpu0");
  EXPECT_EQ(r.attempt, 1);
  EXPECT_EQ(r.worker_id, "host-cpu0");
  EXPECT_EQ(r.gpu, "NVIDIA H200");
  EXPECT_EQ(r.source_hash.size(), 16u) << "the agent hashes the source where the runner gave no hash";
  EXPECT_EQ(r.options_hash, "opt");
  EXPECT_EQ(r.completed_wall_ms, clock_.wall_ms());
  EXPECT_DOUBLE_EQ(r.m.latency_us, 7.0);
  clock_.advance(milliseconds(options_.resend_ms));
  EXPECT_EQ(next_result_for("sb1").result.m.latency_us, 7.0) << "resent from the outbox";
  send(protocol::Ack{"sb1", 1});
  send_kind("sb", "barrier");  // handled after the ACK
  ASSERT_TRUE(events_.wait_for("sb started barrier"));
  const int before = results_in_log_for("sb1");
  clock_.advance(milliseconds(options_.resend_ms * 4));
  next<protocol::Heartbeat>();
  EXPECT_EQ(results_in_log_for("sb1"), before) << "an acknowledged result is not resent";
}

TEST_F(AgentRunnersTest, AJobNoRunnerAcceptsEndsCrashWithoutStopping) {
  start_with(1, 1);
  next<protocol::Ready>();
  send_kind("model", "m1");
  const auto r = next_result_for("m1").result;
  EXPECT_EQ(r.status, ResultStatus::kCrash);
  EXPECT_NE(r.reason.find("no runner"), std::string::npos) << r.reason;
  send_kind("sb", "sb1");
  EXPECT_TRUE(events_.wait_for("sb started sb1"));
}

TEST_F(AgentRunnersTest, JobsDroppedAtShutdownSendNoResultAndTheAgentStopsCleanly) {
  start_with(1, 1);
  next<protocol::Ready>();
  send_kind("kb", "kb1");
  send_kind("kb", "kb2");  // queued
  ASSERT_TRUE(events_.wait_for("kb started kb1"));
  send_kind("sb", "barrier");
  ASSERT_TRUE(events_.wait_for("sb started barrier"));
  stop_ = true;  // kb2 leaves the queue; the fake runners drop what they hold, as jobs not begun
  next<protocol::Disconnect>();
  thread_.join();
  EXPECT_TRUE(run_status_.ok()) << run_status_.to_string();
  EXPECT_EQ(results_in_log_for("kb1") + results_in_log_for("kb2") + results_in_log_for("barrier"), 0)
      << "a dropped job sends no result: its lease expires and it is delivered again";
  EXPECT_EQ(events_.count("kb started kb2"), 0);
}

TEST(MakeWorkerAgent, CpuWorkerGetsHostCapabilitiesADefaultIdAndAStartedSandbox) {
  SystemClock clock;
  WorkerOptions o;
  o.coordinator_endpoint = "tcp://127.0.0.1:1";
  o.backend = Backend::kCpu;
  o.sandbox_path = AK_FAKE_SANDBOX;
  o.cache_dir = (std::filesystem::temp_directory_path() / "ak-agent-cache").string();
  // A lock folder of its own: under ctest -j another test's CPU worker may hold the host-wide
  // default id, and this one would rightly take <host>-cpu0-2.
  o.id_lock_dir = (std::filesystem::temp_directory_path() / ("ak-agent-ids-" + std::to_string(getpid()))).string();
  auto agent = make_worker_agent(o, clock);
  ASSERT_TRUE(agent.ok()) << agent.status().to_string();
  EXPECT_EQ((*agent)->capabilities().gpu_name, "cpu");
  EXPECT_EQ((*agent)->options().worker_id, (*agent)->capabilities().hostname + "-cpu0");
  agent->reset();
  std::filesystem::remove_all(o.cache_dir);
  std::filesystem::remove_all(o.id_lock_dir);
}

TEST(MakeWorkerAgent, BrokenSandboxIsReportedBeforeTheWorkerRegisters) {
  SystemClock clock;
  WorkerOptions o;
  o.coordinator_endpoint = "tcp://127.0.0.1:1";
  o.sandbox_path = "/nonexistent/autokernel-sandbox";
  auto agent = make_worker_agent(o, clock);
  ASSERT_FALSE(agent.ok());
  EXPECT_NE(agent.status().message().find("/nonexistent/autokernel-sandbox"), std::string::npos)
      << agent.status().message();
}

// A cuda agent compiles on half of its share of the host's hardware threads, at most 8, and holds
// one job more; a cpu agent compiles on one thread; given values win.
TEST(AgentParallelism, FollowsTheBackendTheHostAndTheGivenValues) {
  struct Case {
    Backend backend;
    unsigned hardware_threads;
    size_t agents;
    int slots, compile_threads;  // given (0: automatic)
    int want_slots, want_compile_threads;
  };
  for (const Case& c : {
           Case{Backend::kCuda, 16, 1, 0, 0, 9, 8},
           Case{Backend::kCuda, 16, 2, 0, 0, 5, 4},  // two GPUs' agents share the host
           Case{Backend::kCuda, 256, 1, 0, 0, 9, 8},
           Case{Backend::kCuda, 2, 1, 0, 0, 2, 1},
           Case{Backend::kCuda, 16, 8, 0, 0, 2, 1},
           Case{Backend::kCpu, 64, 1, 0, 0, 2, 1},
           Case{Backend::kCuda, 16, 1, 3, 0, 3, 2},  // given slots bound the automatic threads
           Case{Backend::kCuda, 16, 1, 1, 0, 1, 1},
           Case{Backend::kCpu, 16, 1, 0, 4, 5, 4},  // given threads make the automatic slots
           Case{Backend::kCuda, 16, 1, 6, 3, 6, 3},
       }) {
    SCOPED_TRACE(std::string(backend_name(c.backend)) + " on " + std::to_string(c.hardware_threads) + " threads, " +
                 std::to_string(c.agents) + " agents, given " + std::to_string(c.slots) + " slots and " +
                 std::to_string(c.compile_threads) + " threads");
    const AgentParallelism p = agent_parallelism(c.backend, c.hardware_threads, c.agents, c.slots, c.compile_threads);
    EXPECT_EQ(p.slots, c.want_slots);
    EXPECT_EQ(p.compile_threads, c.want_compile_threads);
  }
}

}  // namespace
}  // namespace ak
