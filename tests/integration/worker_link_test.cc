// Issue 21, item 6, with real processes: a worker that cannot reach its coordinator says so
// within seconds, naming the address (nothing listening; a coordinator that refuses its key), and
// worker ids are unique among the live workers of a host (two default ids differ; a second process
// under an id in use is refused).
#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/farm.h"

namespace ak::testing {
namespace {

using namespace std::chrono_literals;

// A worker process with its log (stderr) in `log`.
ChildProcess spawn_worker(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> argv = {bin("autokernel"), "--log-level", "info", "worker", "--backend", "cpu"};
  argv.insert(argv.end(), args.begin(), args.end());
  ChildProcess::Options o;
  o.output_path = log;
  auto w = ChildProcess::spawn(argv, o);
  if (!w.ok()) throw std::runtime_error(w.status().message());
  return std::move(*w);
}

// Re-reads `log` until it holds `text`, or the deadline passes (the worker writes its warning
// when it is due; nothing here decides when).
// Woken by inotify when the worker writes to the log, not by a timer.
bool log_shows(const std::string& log, const std::string& text, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  { std::ofstream touch(log, std::ios::app); }  // the worker may not have opened it yet
  const int in = inotify_init1(IN_CLOEXEC);
  if (in < 0 || inotify_add_watch(in, log.c_str(), IN_MODIFY) < 0) {
    if (in >= 0) close(in);
    throw std::runtime_error("cannot watch " + log);
  }
  bool found = false;
  while (!(found = read_text(log).find(text) != std::string::npos)) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{in, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) > 0) {
      char events[4096];
      if (read(in, events, sizeof events) < 0) break;
    }
  }
  close(in);
  return found;
}

// An address where nothing listens: a port bound and closed again.
std::string dead_endpoint() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  socklen_t len = sizeof addr;
  (void)bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  (void)getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return "tcp://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
}

TEST(WorkerLinkTest, AWorkerWithNoCoordinatorSaysSoWithinSecondsNamingTheAddress) {
  Farm farm;  // only for its folder
  const std::string ep = dead_endpoint();
  const std::string log = farm.dir() + "/worker.log";
  ChildProcess w = spawn_worker({"--id", "lonely", "--coordinator", ep, "--state-dir", farm.dir() + "/state",
                                 "--cache-dir", farm.dir() + "/cache"},
                                log);
  // The sandbox starts first (seconds on a loaded machine); the warning follows 3 s after the
  // agent starts, so 60 s bounds a slow machine, not the warning's delay.
  EXPECT_TRUE(log_shows(log, "worker lonely: cannot reach coordinator " + ep + " for 3 s (no TCP connection)", 60s))
      << read_text(log);
  w.signal(SIGKILL);
  w.wait();
}

TEST(WorkerLinkTest, AWorkerWhoseKeyTheCoordinatorRefusesSaysSo) {
  Farm::Options o;
  o.curve = true;
  Farm farm(o);
  farm.start_coordinator();
  const std::string log = farm.dir() + "/rogue.log";
  ChildProcess w = spawn_worker(
      {"--id", "rogue", "--coordinator", farm.workers_endpoint(), "--key", farm.key_file("rogue"), "--coordinator-key",
       farm.pub_file("coordinator"), "--state-dir", farm.dir() + "/state", "--cache-dir", farm.dir() + "/cache"},
      log);
  EXPECT_TRUE(log_shows(log, "the coordinator refused this worker's CURVE key", 60s)) << read_text(log);
  EXPECT_NE(read_text(log).find("cannot reach coordinator " + farm.workers_endpoint()), std::string::npos);
  w.signal(SIGKILL);
  w.wait();
}

TEST(WorkerLinkTest, TwoWorkersWithDefaultIdsOnOneHostGetDifferentIdsAndASecondProcessUnderAnIdInUseIsRefused) {
  Farm farm;
  farm.start_coordinator();
  const std::string state = farm.dir() + "/state";
  std::vector<ChildProcess> workers;
  for (int i = 0; i < 2; ++i)
    workers.push_back(spawn_worker({"--coordinator", farm.workers_endpoint(), "--state-dir", state, "--cache-dir",
                                    farm.dir() + "/cache", "--heartbeat-ms", "200"},
                                   farm.dir() + "/default-" + std::to_string(i) + ".log"));
  const auto st = farm.wait_status([](const nlohmann::json& s) { return s["workers"].size() >= 2; }, 60s,
                                   "two workers with default ids");
  std::set<std::string> ids;
  for (const auto& w : st["workers"]) ids.insert(w["worker_id"].get<std::string>());
  ASSERT_EQ(ids.size(), 2u) << st.dump();
  for (const auto& id : ids) EXPECT_NE(id.find("-cpu0"), std::string::npos) << id;

  // A second process under one of those ids and the same state folder (its outbox) is refused.
  const std::string taken = *ids.begin();
  const std::string out = farm.dir() + "/second.out";
  EXPECT_NE(run_autokernel_to({"worker", "--backend", "cpu", "--id", taken, "--coordinator", farm.workers_endpoint(),
                               "--state-dir", state, "--cache-dir", farm.dir() + "/cache"},
                              out),
            0);
  EXPECT_NE(read_text(out).find("worker id " + taken + " is in use by another live worker on this host"),
            std::string::npos)
      << read_text(out);
  for (auto& w : workers) {
    w.signal(SIGKILL);
    w.wait();
  }
}

TEST(WorkerLinkTest, ASecondWorkerUnderALiveWorkersIdWithAnotherStateFolderIsRefusedByTheCoordinatorAndExits) {
  Farm farm;
  farm.start_coordinator();
  const std::string log = farm.dir() + "/first.log";
  ChildProcess first =
      spawn_worker({"--id", "twin", "--coordinator", farm.workers_endpoint(), "--state-dir", farm.dir() + "/state-a",
                    "--cache-dir", farm.dir() + "/cache", "--heartbeat-ms", "200"},
                   log);
  farm.wait_status([](const nlohmann::json& s) { return s["workers"].size() == 1; }, 60s, "the first worker");

  // Another state folder: no lock on this host stops it; the coordinator must.
  const std::string out = farm.dir() + "/second.out";
  EXPECT_NE(run_autokernel_to({"worker", "--backend", "cpu", "--id", "twin", "--coordinator", farm.workers_endpoint(),
                               "--state-dir", farm.dir() + "/state-b", "--cache-dir", farm.dir() + "/cache"},
                              out),
            0);
  EXPECT_NE(read_text(out).find("the coordinator refused worker id twin: worker id 'twin' is held by a live worker"),
            std::string::npos)
      << read_text(out);
  bool warned = false;
  for (const auto& line : farm.coordinator_output())
    warned = warned || (line.find("refused twin (worker_id_in_use)") != std::string::npos);
  EXPECT_TRUE(warned) << "the coordinator's log has no warning of the refusal";

  // The first worker still holds its id: a campaign runs on it to the end.
  const std::string cid = farm.submit(quick_campaign(24, "twin"));
  farm.wait_finished(cid, 2, 120s);
  EXPECT_EQ(read_text(log).find("refused"), std::string::npos) << read_text(log);

  // Killed and restarted with its own state folder, it is the same instance: it takes the id back
  // at once and the campaign goes on on it.
  first.signal(SIGKILL);
  first.wait();
  const auto st = farm.client().status();
  ASSERT_TRUE(st.ok()) << st.status().message();
  int finished = 0;
  for (const auto& c : st->campaigns)
    if (c.campaign_id == cid) finished = static_cast<int>(c.finished);
  const std::string again_log = farm.dir() + "/again.log";
  ChildProcess again =
      spawn_worker({"--id", "twin", "--coordinator", farm.workers_endpoint(), "--state-dir", farm.dir() + "/state-a",
                    "--cache-dir", farm.dir() + "/cache", "--heartbeat-ms", "200"},
                   again_log);
  farm.wait_finished(cid, finished + 1, 120s);
  EXPECT_EQ(read_text(again_log).find("refused"), std::string::npos) << read_text(again_log);
  again.signal(SIGKILL);
  again.wait();
}

}  // namespace
}  // namespace ak::testing
