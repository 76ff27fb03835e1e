// The delivery guarantees of ARCHITECTURE.md, proven with real processes: a real redis-server,
// a real coordinator and real CPU workers on loopback, killed with SIGKILL where the guarantee is
// about crashes.
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>

#include <cstdio>
#include <set>

#include <zmq.hpp>

#include "common/protocol.h"
#include "kernels/registry.h"
#include "tests/integration/farm.h"

namespace ak::testing {
namespace {

using nlohmann::json;

void expect_one_pass_row_per_job(const StoreSnapshot& snap, const std::string& cid, size_t n_jobs) {
  std::set<std::string> jobs, rows;
  for (const auto& j : snap.jobs) {
    if (j.spec.campaign_id == cid) jobs.insert(j.spec.job_id);
  }
  std::map<std::string, int> row_count;
  for (const auto& r : snap.results) {
    if (!jobs.count(r.job_id)) continue;
    ++row_count[r.job_id];
    EXPECT_EQ(r.status, ResultStatus::kPass) << r.job_id << " " << r.stage << ": " << r.reason;
  }
  EXPECT_EQ(jobs.size(), n_jobs);
  EXPECT_EQ(row_count.size(), n_jobs);
  for (const auto& [id, n] : row_count) EXPECT_EQ(n, 1) << id;
  for (const auto& j : snap.jobs) {
    if (j.spec.campaign_id == cid) {
      EXPECT_EQ(j.state, JobState::kDone) << j.spec.job_id;
    }
  }
}

TEST(FarmTest, FiveHundredJobsOnFourWorkersEndWithExactlyOneResultRowPerJob) {
  // Four workers on CI's two cores: a heartbeat late by 3 s would drop one from the connected
  // gauge checked mid-campaign; 10 s keeps the check exact without hiding a dead worker for long.
  Farm::Options o;
  o.worker_timeout_ms = 10'000;
  Farm farm(o);
  farm.start_coordinator();
  for (int i = 0; i < 4; ++i) farm.start_worker("w" + std::to_string(i));
  farm.wait_workers(4);
  const std::string before = farm.scrape();
  ASSERT_FALSE(before.empty()) << "no /metrics on port " << farm.metrics_port();
  const std::string cid = farm.submit(quick_campaign(500, "five-hundred"));

  // /metrics moves while the campaign runs.
  farm.wait_finished(cid, 100, std::chrono::seconds(300));
  const std::string mid = farm.scrape();
  const double completed_mid = metric_value(mid, "autokernel_jobs_completed_total");
  EXPECT_GE(completed_mid, 100);
  EXPECT_GT(metric_value(mid, "autokernel_jobs_dispatched_total"), metric_value(before, "autokernel_jobs_dispatched_total"));
  EXPECT_EQ(metric_value(mid, "autokernel_workers_connected"), 4);

  json final_status = farm.wait_campaign(cid, std::chrono::seconds(600));
  const std::string after = farm.scrape();
  EXPECT_EQ(metric_value(after, "autokernel_jobs_completed_total", "status=\"PASS\""), 504);
  EXPECT_GT(metric_value(after, "autokernel_jobs_completed_total"), completed_mid);
  EXPECT_EQ(metric_value(after, "autokernel_queue_depth"), 0);
  EXPECT_GE(metric_value(after, "autokernel_job_duration_seconds_count"), 504);

  // Every worker took part.
  auto snap = farm.snapshot();
  expect_one_pass_row_per_job(snap, cid, 504);
  std::set<std::string> workers_used;
  for (const auto& r : snap.results) workers_used.insert(r.worker_id);
  EXPECT_EQ(workers_used.size(), 4u);

  // The live scrape passes promtool's linter.
  const std::string path = farm.dir() + "/metrics.txt";
  {
    std::ofstream out(path);
    out << after;
  }
  if (system("command -v promtool >/dev/null 2>&1") != 0) GTEST_SKIP() << "promtool not installed (Debian package prometheus)";
  EXPECT_EQ(system(("promtool check metrics < " + path).c_str()), 0) << after;
}

// A candidate whose first call in the whole campaign (whoever claims `token`) tells the test
// through the `started` FIFO that it is running and then blocks until the test opens `release`;
// every other call runs straight through. So the test knows a job is in flight without guessing
// how long anything takes.
json handshake_campaign(int n, const std::string& name, const std::string& dir) {
  // The starter as the farm ships it (its shared parts inlined), not the file on disk.
  std::string src = kernels::find("softmax")->backends.at(Backend::kCpu).source;
  const std::string entry = "extern \"C\" int ak_softmax_cpu(";
  auto pos = src.rfind(entry);  // the last one: the header comment names it too
  if (pos == std::string::npos) throw std::runtime_error("starter entry not found");
  src.replace(pos, entry.size(), "static int starter_softmax(");
  src += R"(
#include <cstdio>
#include <fcntl.h>
#include <unistd.h>
extern "C" int ak_softmax_cpu(const void* in, void* out, int64_t rows, int64_t cols, int dtype) {
  if (std::rename("DIR/token", "DIR/token.claimed") == 0) {
    int s = open("DIR/started", O_WRONLY);
    if (s >= 0) { char c = 1; (void)!write(s, &c, 1); close(s); }
    int r = open("DIR/release", O_RDONLY);
    if (r >= 0) { char c; while (read(r, &c, 1) > 0) {} close(r); }
  }
  return starter_softmax(in, out, rows, cols, dtype);
}
)";
  for (size_t p = src.find("DIR/"); p != std::string::npos; p = src.find("DIR/", p + dir.size()))
    src.replace(p, 3, dir);
  return {{"name", name},     {"kernel_type", "softmax"}, {"backend", "cpu"},  {"shapes", {{8, 64}}},
          {"dtypes", {"fp32"}}, {"configs", "default"},    {"repeat", n},      {"source", src},
          {"measure", {{"warmup", 1}, {"min_samples", 3}, {"max_samples", 3}, {"max_time_ms", 5}}}};
}

TEST(FarmTest, JobOfAWorkerKilledMidJobIsRerunElsewhereAndStillHasOneRow) {
  // The worker timeout is shorter than the lease, so the kill is noticed as a silent worker.
  Farm::Options o;
  o.lease_ms = 4000;
  o.worker_timeout_ms = 1500;
  // The candidate signals the test through FIFOs in the farm's folder; a confined candidate cannot
  // see that folder (worker/sandbox/VERIFICATION.md, "Confinement").
  o.worker_args = {"--unconfined"};
  Farm farm(o);
  const std::string dir = farm.dir();
  ASSERT_EQ(mkfifo((dir + "/started").c_str(), 0600), 0);
  ASSERT_EQ(mkfifo((dir + "/release").c_str(), 0600), 0);
  { std::ofstream(dir + "/token") << "1"; }
  // Read-write, so the FIFO always has a writer (us) and poll() reports only real data.
  const int started = open((dir + "/started").c_str(), O_RDWR | O_NONBLOCK);
  ASSERT_GE(started, 0);

  farm.start_coordinator();
  farm.start_worker("k0", /*slots=*/1);
  farm.wait_workers(1);
  const std::string cid = farm.submit(handshake_campaign(8, "kill-a-worker", dir));
  pollfd p{started, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 120'000), 1) << "the candidate never started";
  close(started);
  // k0 holds one slot, and its candidate is running: that job is in flight.
  json st = farm.client().status().value();
  std::string victim_job;
  for (const auto& w : st["workers"])
    if (w["worker_id"] == "k0" && w["leased"].size() == 1) victim_job = w["leased"][0];
  ASSERT_FALSE(victim_job.empty()) << st.dump();
  farm.kill_worker("k0");
  for (int i = 1; i < 4; ++i) farm.start_worker("k" + std::to_string(i), /*slots=*/1);

  farm.wait_campaign(cid, std::chrono::seconds(120));
  auto snap = farm.snapshot();
  expect_one_pass_row_per_job(snap, cid, 8);
  bool found = false;
  for (const auto& r : snap.results) {
    if (r.job_id != victim_job) continue;
    found = true;
    EXPECT_GE(r.attempt, 2) << "the killed worker's job must have been delivered again";
    EXPECT_NE(r.worker_id, "k0");
  }
  EXPECT_TRUE(found);
  const std::string m = farm.scrape();
  EXPECT_GE(metric_value(m, "autokernel_jobs_requeued_total"), 1);
  EXPECT_GE(metric_value(m, "autokernel_heartbeats_missed_total"), 1);
  // Unblock the claimed candidate should its sandbox still be alive (it should not be).
  const int release = open((dir + "/release").c_str(), O_WRONLY | O_NONBLOCK);
  if (release >= 0) close(release);
}

TEST(FarmTest, CoordinatorKilledAndRestartedMidCampaignLosesNoAcknowledgedResult) {
  Farm farm;
  farm.start_coordinator();
  for (int i = 0; i < 4; ++i) farm.start_worker("r" + std::to_string(i));
  farm.wait_workers(4);
  const std::string cid = farm.submit(quick_campaign(240, "restart"));
  farm.wait_finished(cid, 40, std::chrono::seconds(300));
  farm.kill_coordinator();
  // Everything stored (and so possibly acknowledged) before the crash.
  auto before = farm.snapshot();
  ASSERT_GE(before.results.size(), 40u);
  ASSERT_LT(before.results.size(), 240u) << "campaign finished before the crash; the test proves nothing";

  farm.start_coordinator();
  farm.wait_campaign(cid, std::chrono::seconds(600));
  auto after = farm.snapshot();
  expect_one_pass_row_per_job(after, cid, 240);
  std::map<std::string, ResultRecord> rows;
  for (const auto& r : after.results) rows[r.job_id] = r;
  for (const auto& r : before.results) {
    ASSERT_TRUE(rows.count(r.job_id)) << r.job_id << " was stored before the crash and is gone";
    EXPECT_EQ(rows[r.job_id].attempt, r.attempt);
    EXPECT_EQ(rows[r.job_id].worker_id, r.worker_id);
  }
}

TEST(FarmTest, ACancelledCampaignStaysCancelledAcrossARestartAndNoneOfItsJobsRuns) {
  Farm farm;
  farm.start_coordinator();
  const std::string gone = farm.submit(quick_campaign(24, "cancelled"));
  const std::string kept = farm.submit(quick_campaign(24, "kept"));
  auto r = farm.client().cancel(gone, "superseded");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->cancelled, 24);
  EXPECT_EQ(r->stopping, 0);
  farm.kill_coordinator();
  farm.start_coordinator();
  farm.start_worker("w0");
  farm.wait_workers(1);
  const json st = farm.wait_campaign(kept, std::chrono::seconds(800));
  for (const auto& c : st["campaigns"])
    if (c["campaign_id"] == gone) {
      EXPECT_EQ(c["cancelled"], true) << c.dump();
      EXPECT_EQ(c["cancel_reason"], "superseded") << c.dump();
      EXPECT_EQ(c["complete"], true) << c.dump();
    }
  int cancelled = 0, kept_pass = 0;
  for (const auto& row : farm.snapshot().results) {
    const bool of_gone = row.job_id.rfind(gone, 0) == 0;
    if (of_gone) {
      EXPECT_EQ(row.status, ResultStatus::kCancelled) << row.job_id;
      EXPECT_EQ(row.reason, "campaign " + gone + " was cancelled: superseded");
      ++cancelled;
    } else if (row.status == ResultStatus::kPass) {
      ++kept_pass;
    }
  }
  EXPECT_EQ(cancelled, 24);
  EXPECT_EQ(kept_pass, 24);
  // Cancelling again changes nothing.
  auto again = farm.client().cancel(gone);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->finished, 24);
  EXPECT_EQ(again->cancelled, 0);
}

// A raw DEALER acting as a hostile or broken worker.
class RawPeer {
 public:
  RawPeer(const std::string& endpoint, const std::string& identity) : ctx_(1), sock_(ctx_, zmq::socket_type::dealer) {
    sock_.set(zmq::sockopt::routing_id, identity);
    sock_.set(zmq::sockopt::linger, 0);
    sock_.connect(endpoint);
  }
  void send(const std::string& frame) { sock_.send(zmq::buffer(frame), zmq::send_flags::none); }
  void send_parts(const std::vector<std::string>& parts) {
    for (size_t i = 0; i < parts.size(); ++i)
      sock_.send(zmq::buffer(parts[i]), i + 1 < parts.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
  // The next ERROR's code name, or "" if nothing arrived within the timeout.
  std::string next_error() {
    zmq::pollitem_t item{sock_.handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::seconds(10));
    if (!(item.revents & ZMQ_POLLIN)) return "";
    zmq::message_t m;
    (void)sock_.recv(m);
    auto d = protocol::decode(m.to_string_view());
    if (!d.ok()) return "UNDECODABLE";
    auto* e = std::get_if<protocol::Error>(&*d.message);
    return e ? protocol::error_code_name(e->code) : std::string("NOT_AN_ERROR:") + protocol::type_name(*d.message);
  }

 private:
  zmq::context_t ctx_;
  zmq::socket_t sock_;
};

TEST(FarmTest, EveryKindOfBadInputGetsAnErrorReplyAndTheCoordinatorKeepsServing) {
  Farm farm;
  farm.start_coordinator();
  RawPeer peer(farm.workers_endpoint(), "intruder");
  auto env = [](const std::string& type, const json& body, int v = protocol::kProtocolVersion) {
    return json{{"v", v}, {"type", type}, {"body", body}}.dump();
  };
  peer.send("\x01\x02garbage\xff");
  EXPECT_EQ(peer.next_error(), "MALFORMED");
  peer.send("[1,2,3]");
  EXPECT_EQ(peer.next_error(), "MALFORMED");
  peer.send(R"({"type":"READY"})");
  EXPECT_EQ(peer.next_error(), "MALFORMED");
  peer.send(env("READY", json::object(), 99));
  EXPECT_EQ(peer.next_error(), "BAD_VERSION");
  peer.send(env("TELEPORT", json::object()));
  EXPECT_EQ(peer.next_error(), "UNKNOWN_TYPE");
  peer.send(env("READY", {{"worker_id", 42}}));
  EXPECT_EQ(peer.next_error(), "BAD_BODY");
  peer.send(std::string(protocol::kMaxFrameBytes + 1024, 'x'));
  EXPECT_EQ(peer.next_error(), "OVERSIZED");
  peer.send(env("HEARTBEAT", {{"worker_id", "intruder"}, {"in_flight", json::array()}}));
  EXPECT_EQ(peer.next_error(), "UNKNOWN_WORKER");
  peer.send(env("HEARTBEAT", {{"worker_id", "someone-else"}, {"in_flight", json::array()}}));
  EXPECT_EQ(peer.next_error(), "IDENTITY_MISMATCH");
  peer.send(env("ACK", {{"job_id", "x"}, {"attempt", 1}}));
  EXPECT_EQ(peer.next_error(), "UNKNOWN_TYPE");
  peer.send_parts({"one", "two"});
  EXPECT_EQ(peer.next_error(), "MALFORMED");

  // A bad client request is refused with a reason, not a crash.
  auto bad = farm.client().submit(json{{"kernel_type", "softmax"}, {"backend", "cpu"}, {"shapez", 1}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("shapez"), std::string::npos) << bad.status().message();

  // Still serving: a real worker completes a campaign.
  farm.start_worker("good");
  farm.wait_workers(1);
  const std::string cid = farm.submit(quick_campaign(24, "after-abuse"));
  farm.wait_campaign(cid, std::chrono::seconds(800));
  expect_one_pass_row_per_job(farm.snapshot(), cid, 24);
  const std::string m = farm.scrape();
  for (const char* kind : {"MALFORMED", "BAD_VERSION", "UNKNOWN_TYPE", "BAD_BODY", "OVERSIZED", "UNKNOWN_WORKER",
                           "IDENTITY_MISMATCH", "BAD_REQUEST"})
    EXPECT_GE(metric_value(m, "autokernel_protocol_errors_total", std::string("kind=\"") + kind + "\""), 1) << kind;
}

// What a new user does first: `autokernel starter T --backend cpu` for every kernel type with a
// CPU backend, each saved and named unchanged as a campaign's source_file, checked offline,
// submitted and passing.
TEST(FarmTest, EveryCpuStarterPrintedByTheCliIsSubmittedUnchangedAndPasses) {
  Farm farm;
  farm.start_coordinator();
  farm.start_worker("s0", 2);
  farm.wait_workers(1);
  const std::string log = farm.dir() + "/submit.txt";
  size_t types = 0;
  for (const kernels::KernelSpec* k : kernels::all()) {
    if (!k->backends.count(Backend::kCpu)) continue;
    ++types;
    const std::string file = farm.dir() + "/" + k->name + "_starter.cc";
    ASSERT_EQ(run_autokernel_to({"starter", k->name, "--backend", "cpu"}, file), 0) << read_text(file);
    // The smallest of the type's edge shapes: one verified, timed job per type.
    const std::string campaign = farm.dir() + "/" + k->name + ".json";
    std::ofstream(campaign) << nlohmann::json{
        {"name", k->name + "-starter"},
        {"backend", "cpu"},
        {"kernel_type", k->name},
        {"source_file", k->name + "_starter.cc"},
        {"shapes", {k->edge_shapes.back()}},
        {"dtypes", {"fp32"}},
        {"configs", "default"}}.dump();
    ASSERT_EQ(run_autokernel_to({"check", campaign}, log), 0) << read_text(log);
    ASSERT_EQ(run_autokernel_to({"submit", campaign, "--wait", "--client", farm.client_endpoint()}, log), 0)
        << read_text(log);
    // --wait ends with how the campaign ended and what to run next.
    EXPECT_NE(read_text(log).find(") is done: 1 of 1 jobs finished, 1 PASS, 0 not PASS"), std::string::npos)
        << read_text(log);
    EXPECT_NE(read_text(log).find("next: autokernel results --client " + farm.client_endpoint()), std::string::npos)
        << read_text(log);
  }
  ASSERT_GE(types, 7u);
  const StoreSnapshot snap = farm.snapshot();
  ASSERT_EQ(snap.results.size(), types);
  for (const auto& r : snap.results)
    EXPECT_EQ(r.status, ResultStatus::kPass) << r.job_id << " " << r.stage << ": " << r.reason;
}

}  // namespace
}  // namespace ak::testing
