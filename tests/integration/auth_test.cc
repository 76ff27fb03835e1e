// The attacks of issue 19 against a real coordinator (a real process, real Redis, real ZeroMQ
// CURVE): a rogue peer without an allow-listed key, a forged result from an allow-listed worker,
// a foreign cancel, a non-admin or bad import, job hoarding, binding beyond loopback without keys,
// and the lease bugs (a restarted worker, a phantom lease after a coordinator restart). Fake
// workers are plain DEALER sockets that speak the protocol, so that a test controls exactly what a
// worker holds and sends.
#include <chrono>
#include <optional>
#include <string>

#include <gtest/gtest.h>
#include <zmq.hpp>

#include "common/protocol.h"
#include "tests/integration/farm.h"

namespace ak::testing {
namespace {

using nlohmann::json;
namespace pr = protocol;
using namespace std::chrono_literals;

// A worker made of one DEALER socket. keys: CURVE keys (its pair and the coordinator's public
// key), or none.
class FakeWorker {
 public:
  FakeWorker(const std::string& endpoint, const std::string& id, const CurveClientKeys& keys)
      : id_(id), socket_(ctx_, zmq::socket_type::dealer) {
    socket_.set(zmq::sockopt::routing_id, id);
    socket_.set(zmq::sockopt::linger, 0);
    if (!keys.server_key.empty()) {
      socket_.set(zmq::sockopt::curve_serverkey, keys.server_key);
      socket_.set(zmq::sockopt::curve_publickey, keys.public_key);
      socket_.set(zmq::sockopt::curve_secretkey, keys.secret_key);
    }
    socket_.connect(endpoint);
  }
  const std::string& id() const { return id_; }

  void send(const pr::Message& m) {
    const std::string frame = pr::encode(m);
    (void)socket_.send(zmq::buffer(frame), zmq::send_flags::dontwait);
  }
  void ready(int slots) { send(pr::Ready{id_, cpu_caps(), slots}); }
  void result(const pr::Job& job, ResultStatus status, double latency_us) {
    ResultRecord r;
    r.job_id = job.spec.job_id;
    r.attempt = job.attempt;
    r.status = status;
    r.worker_id = id_;
    r.gpu = "cpu";
    r.m.latency_us = latency_us;
    r.m.baseline_us = 50.0;
    r.m.speedup = 50.0 / latency_us;
    send(pr::ResultMsg{id_, r});
  }

  // The next message of type T within `timeout` (others are skipped), or nothing.
  template <typename T>
  std::optional<T> wait_for(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, left);
      if (!(item.revents & ZMQ_POLLIN)) return std::nullopt;
      zmq::message_t frame;
      if (!socket_.recv(frame, zmq::recv_flags::dontwait)) continue;
      auto d = pr::decode(frame.to_string_view());
      if (!d.ok()) continue;
      if (auto* t = std::get_if<T>(&*d.message)) return *t;
    }
  }

 private:
  static Capabilities cpu_caps() {
    Capabilities c;
    c.gpu_name = "cpu";
    c.arch = "x86_64";
    c.backends = {Backend::kCpu};
    return c;
  }
  std::string id_;
  zmq::context_t ctx_{1};
  zmq::socket_t socket_;
};

// Polls /metrics until `name{labels}` reaches `at_least` (the coordinator counts a refusal when it
// happens; this is how a test knows a handshake was refused, without sleeping).
bool wait_metric(Farm& farm, const std::string& name, const std::string& labels, double at_least,
                 std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (metric_value(farm.scrape(), name, labels) >= at_least) return true;
    // The next scrape waits for the coordinator's next state change or 200 ms (a long poll).
    (void)farm.client().status_after(1'000'000'000, 200ms);
  }
  return false;
}

json workers_of(Farm& farm) {
  auto st = farm.client().status();
  EXPECT_TRUE(st.ok()) << st.status().message();
  return st.ok() ? json(*st)["workers"] : json::array();
}

Farm::Options curve_options() {
  Farm::Options o;
  o.curve = true;
  o.lease_ms = 60'000;  // long: a test that passes quickly did not wait a lease out
  o.worker_timeout_ms = 60'000;
  return o;
}

TEST(AuthFarmTest, APeerWithoutAnAllowListedKeyGetsNoHandshakeAndCannotSubmitOrTakeJobs) {
  Farm farm(curve_options());
  farm.start_coordinator();
  const std::string cid = farm.submit(quick_campaign(24, "bystander"));

  // A client with no keys, and one with a key in no list: both time out, nothing is stored.
  CoordinatorClient anonymous(farm.client_endpoint(), 1500ms);
  auto a = anonymous.submit(quick_campaign(24, "anonymous"));
  EXPECT_FALSE(a.ok());
  CoordinatorClient rogue(farm.client_endpoint(), 1500ms, farm.client_keys("rogue"));
  auto r = rogue.submit(quick_campaign(24, "rogue"));
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(wait_metric(farm, "autokernel_peer_refusals_total", "reason=\"unknown_key\"", 1, 20s));

  // A worker with an unlisted key asks for 8 jobs: no handshake, no registration, no lease.
  CurveClientKeys rogue_worker_keys = farm.client_keys("rogue");
  FakeWorker hoarder(farm.workers_endpoint(), "hoarder", rogue_worker_keys);
  hoarder.ready(8);
  FakeWorker keyless(farm.workers_endpoint(), "keyless", {});
  keyless.ready(8);
  EXPECT_TRUE(wait_metric(farm, "autokernel_peer_refusals_total", "reason=\"unknown_key\"", 2, 20s));
  EXPECT_FALSE(hoarder.wait_for<pr::Job>(500ms).has_value());
  EXPECT_FALSE(keyless.wait_for<pr::Job>(100ms).has_value());
  EXPECT_TRUE(workers_of(farm).empty());

  // The listed worker runs the bystander's campaign to the end: nothing LOST.
  farm.start_worker("w1");
  const json st = farm.wait_campaign(cid, 120s);
  auto snap = farm.snapshot();
  EXPECT_EQ(snap.campaigns.size(), 1u) << "only the listed client's campaign";
  EXPECT_EQ(snap.results.size(), 24u);
  for (const auto& row : snap.results) {
    EXPECT_NE(row.status, ResultStatus::kLost) << row.job_id;
    EXPECT_EQ(row.worker_id, "w1");
  }
  for (const auto& w : workers_of(farm)) EXPECT_EQ(w["worker_id"], "w1");
}

TEST(AuthFarmTest, AnAllowListedWorkerCannotReportAJobLeasedToAnotherWorker) {
  Farm farm(curve_options());
  farm.start_coordinator();
  farm.submit(quick_campaign(24, "victim's"));
  FakeWorker victim(farm.workers_endpoint(), "victim", farm.client_keys("worker"));
  victim.ready(1);
  const auto job = victim.wait_for<pr::Job>(20s);
  ASSERT_TRUE(job.has_value());

  FakeWorker rogue(farm.workers_endpoint(), "rogue", farm.client_keys("worker2"));
  rogue.ready(0);  // registered, takes nothing
  rogue.result(*job, ResultStatus::kPass, 1e-6);
  const auto refused = rogue.wait_for<pr::Error>(20s);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->code, pr::ErrorCode::kForbidden) << refused->message;
  // A queued job never delivered: the same.
  pr::Job queued = *job;
  queued.spec.job_id = job->spec.job_id.substr(0, job->spec.job_id.size() - 1) + "9";
  rogue.result(queued, ResultStatus::kPass, 1e-6);
  ASSERT_TRUE(rogue.wait_for<pr::Error>(20s).has_value());

  EXPECT_TRUE(farm.snapshot().results.empty()) << "no forged row";
  auto best = farm.client().best({});
  ASSERT_TRUE(best.ok());
  EXPECT_TRUE(best->entries.empty()) << "nothing forged entered the tuning database";
  // A flood of forgeries: each refused and counted, one log line for the peer per interval.
  for (int i = 0; i < 50; ++i) {
    rogue.result(*job, ResultStatus::kPass, 1e-6);
    ASSERT_TRUE(rogue.wait_for<pr::Error>(20s).has_value()) << i;
  }
  EXPECT_GE(metric_value(farm.scrape(), "autokernel_peer_refusals_total", "reason=\"not_leased\""), 52);
  // The coordinator logs a refusal before it answers it, so every line is in by now.
  size_t lines = 0;
  std::string log;
  for (const auto& line : farm.coordinator_output()) {
    log += line + "\n";
    if (line.find("refused rogue") != std::string::npos) ++lines;
  }
  EXPECT_EQ(lines, 1u) << log;

  // The holder's own result is stored, with its own name.
  victim.result(*job, ResultStatus::kPass, 25.0);
  ASSERT_TRUE(victim.wait_for<pr::Ack>(20s).has_value());
  auto snap = farm.snapshot();
  ASSERT_EQ(snap.results.size(), 1u);
  EXPECT_EQ(snap.results[0].job_id, job->spec.job_id);
  EXPECT_EQ(snap.results[0].worker_id, "victim");
  EXPECT_DOUBLE_EQ(snap.results[0].m.latency_us, 25.0);
}

TEST(AuthFarmTest, OnlyTheOwnerOrAnAdminCancelsAndOnlyAnAdminImports) {
  Farm farm(curve_options());
  farm.start_coordinator();
  CoordinatorClient alice(farm.client_endpoint(), 10s, farm.client_keys("alice"));
  CoordinatorClient mallory(farm.client_endpoint(), 10s, farm.client_keys("mallory"));
  auto submitted = alice.submit(quick_campaign(24, "alice's"));
  ASSERT_TRUE(submitted.ok()) << submitted.status().message();
  const std::string cid = submitted->campaign_id;

  auto foreign = mallory.cancel(cid, "mine now");
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.status().message().find("FORBIDDEN"), std::string::npos) << foreign.status().message();
  auto st = farm.client().status();
  ASSERT_TRUE(st.ok());
  for (const auto& c : st->campaigns) EXPECT_FALSE(c.cancelled);

  // Imports: a submit client may not; an admin may, and a bad entry is refused even to an admin.
  json entry = {{"kernel_type", "softmax"}, {"backend", "cpu"},   {"gpu_model", "cpu"},
                {"dtype", "fp32"},          {"shape", {8, 64}},   {"config", {{"AK_VEC", 8}}},
                {"latency_us", 3.0},        {"baseline_us", 6.0}, {"speedup", 2.0}};
  const json doc = {{"format", 1}, {"entries", {entry}}};
  auto by_alice = alice.import_best(doc);
  ASSERT_FALSE(by_alice.ok());
  EXPECT_NE(by_alice.status().message().find("FORBIDDEN"), std::string::npos) << by_alice.status().message();
  json bad = entry;
  bad["config"]["AK_UNKNOWN"] = 1;
  bad["latency_us"] = 1e-6;
  auto bad_import = farm.client().import_best({{"format", 1}, {"entries", {bad}}});
  ASSERT_FALSE(bad_import.ok());
  EXPECT_NE(bad_import.status().message().find("BAD_REQUEST"), std::string::npos) << bad_import.status().message();
  auto best = farm.client().best({});
  ASSERT_TRUE(best.ok());
  EXPECT_TRUE(best->entries.empty());
  auto good = farm.client().import_best(doc);
  ASSERT_TRUE(good.ok()) << good.status().message();
  EXPECT_EQ(good->stored, 1);

  // The CLI with its keys from flags: the owner cancels.
  EXPECT_EQ(run_autokernel({"cancel", cid, "--client", farm.client_endpoint(), "--key", farm.key_file("alice"),
                            "--coordinator-key", farm.pub_file("coordinator")}),
            0);
  st = farm.client().status();
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->campaigns.size(), 1u);
  EXPECT_TRUE(st->campaigns[0].cancelled);
  const std::string metrics = farm.scrape();
  EXPECT_GE(metric_value(metrics, "autokernel_peer_refusals_total", "reason=\"not_owner\""), 1);
  EXPECT_GE(metric_value(metrics, "autokernel_peer_refusals_total", "reason=\"not_admin\""), 1);
}

TEST(AuthFarmTest, ACoordinatorWithoutKeysRefusesToBindBeyondLoopbackUnlessInsecure) {
  Farm farm;  // only for its Redis
  const std::string out = farm.dir() + "/coordinator.out";
  const std::vector<std::string> base = {"coordinator", "--redis",        farm.redis_url(),   "--metrics",
                                         "127.0.0.1:0", "--clients-bind", "tcp://127.0.0.1:*"};
  std::vector<std::string> wide = base;
  wide.insert(wide.end(), {"--workers-bind", "tcp://0.0.0.0:*"});
  EXPECT_NE(run_autokernel_to(wide, out), 0);
  EXPECT_NE(read_text(out).find("refusing to bind tcp://0.0.0.0:*"), std::string::npos) << read_text(out);

  // With --insecure it starts (its READY line), binding what it was told.
  std::vector<std::string> argv = {bin("autokernel"), "--log-level", "warn"};
  argv.insert(argv.end(), wide.begin(), wide.end());
  argv.push_back("--insecure");
  ChildProcess::Options o;
  o.capture_stdout = true;
  auto c = ChildProcess::spawn(argv, o);
  ASSERT_TRUE(c.ok());
  auto line = c->wait_for_line("READY ", std::chrono::seconds(30));
  ASSERT_TRUE(line.ok()) << line.status().message();
  EXPECT_NE(line->find("tcp://0.0.0.0:"), std::string::npos) << *line;
}

TEST(AuthFarmTest, ARestartedWorkerGetsItsPredecessorsJobsBackAtOnce) {
  Farm farm(curve_options());  // leases of 60 s
  farm.start_coordinator();
  farm.submit(quick_campaign(24, "restart"));
  std::string held;
  {
    FakeWorker first(farm.workers_endpoint(), "w1", farm.client_keys("worker"));
    first.ready(1);
    auto job = first.wait_for<pr::Job>(20s);
    ASSERT_TRUE(job.has_value());
    held = job->spec.job_id;
  }  // the process ends without a word
  FakeWorker second(farm.workers_endpoint(), "w1", farm.client_keys("worker"));
  // Its READY may meet the old connection still open (the ROUTER then drops the new one and the
  // DEALER reconnects): READY again until a JOB comes, as a worker re-registers on UNKNOWN_WORKER.
  std::optional<pr::Job> next;
  for (int i = 0; i < 40 && !next; ++i) {
    second.ready(1);
    next = second.wait_for<pr::Job>(500ms);
  }
  ASSERT_TRUE(next.has_value()) << "the new process got no job: it waits out its predecessor's lease";
  auto snap = farm.snapshot();
  for (const auto& j : snap.jobs) {
    if (j.spec.job_id != held) continue;
    EXPECT_NE(j.state, JobState::kLeased) << "the predecessor's lease is released";
    ASSERT_FALSE(j.attempt_reasons.empty());
    EXPECT_EQ(j.attempt_reasons[0], "worker w1 registered again (restarted)");
  }
}

TEST(AuthFarmTest, APhantomLeaseAfterACoordinatorRestartIsReleasedByTheWorkersHeartbeats) {
  Farm farm(curve_options());  // leases of 60 s
  farm.start_coordinator();
  farm.submit(quick_campaign(24, "phantom"));
  std::string phantom;
  {
    FakeWorker lost(farm.workers_endpoint(), "w1", farm.client_keys("worker"));
    lost.ready(1);
    auto job = lost.wait_for<pr::Job>(20s);
    ASSERT_TRUE(job.has_value());
    phantom = job->spec.job_id;
  }
  farm.kill_coordinator();
  farm.start_coordinator();
  // w1 comes back holding nothing: READY, then heartbeats that list nothing.
  FakeWorker back(farm.workers_endpoint(), "w1", farm.client_keys("worker"));
  std::optional<pr::Job> next;
  back.ready(1);
  for (int i = 0; i < 40 && !next; ++i) {
    back.send(pr::Heartbeat{"w1", {}});
    next = back.wait_for<pr::Job>(250ms);
  }
  ASSERT_TRUE(next.has_value()) << "w1 idles on the phantom lease";
  for (const auto& j : farm.snapshot().jobs) {
    if (j.spec.job_id == phantom) {
      EXPECT_NE(j.state, JobState::kLeased);
    }
  }
}

}  // namespace
}  // namespace ak::testing
