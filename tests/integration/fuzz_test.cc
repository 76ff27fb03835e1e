// A hostile peer against a real farm (issue 19, "a coordinator no peer can exhaust"): a real
// redis-server, a real coordinator process and a CPU worker on loopback, and ak_fuzz_peers
// sending garbage, deeply nested JSON and oversized frames to both the worker and the client
// port. The coordinator's resident memory (VmRSS) must grow by less than 100 MB, and it must
// still answer STATUS and run a normal campaign to the end afterwards. RSS is read again once the
// frames queued when the fuzzer stopped have been refused (the refusal count stands still).
// ctest runs it for 5 s; bench/fuzz.sh sets AK_FUZZ_SECONDS=120 for the two minutes.
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/integration/farm.h"

namespace ak {
namespace {

using ak::testing::Farm;

// VmRSS or VmHWM of `pid` [kB], from /proc/<pid>/status; -1 when unreadable.
int64_t proc_status_kb(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1));
  return -1;
}

TEST(FuzzFarm, GarbageOnBothPortsLeavesTheCoordinatorSmallAndServing) {
  const char* env = std::getenv("AK_FUZZ_SECONDS");
  const double seconds = env ? std::atof(env) : 5.0;
  Farm farm;
  farm.start_coordinator();
  farm.start_worker("w-bystander", 2);
  farm.wait_workers(1);
  const pid_t pid = farm.coordinator_pid();
  const int64_t rss_before_kb = proc_status_kb(pid, "VmRSS");
  ASSERT_GT(rss_before_kb, 0);

  auto fuzz = ChildProcess::spawn({ak::testing::bin("ak_fuzz_peers"), "--workers", farm.workers_endpoint(), "--clients",
                                   farm.client_endpoint(), "--seconds", std::to_string(seconds)},
                                  {});
  ASSERT_TRUE(fuzz.ok()) << fuzz.status().message();
  auto code = fuzz->wait_for(std::chrono::milliseconds(int64_t(seconds * 1000) + 60'000));
  ASSERT_TRUE(code.has_value()) << "the fuzzer did not end";
  EXPECT_EQ(*code, 0);

  const int64_t rss_at_end_kb = proc_status_kb(pid, "VmRSS");

  // Still serving: STATUS (the fuzzer shared this address's request budget; it refills in a
  // second). Its answer also means the frames queued before it were read and refused.
  const auto st = farm.wait_status([](const nlohmann::json& s) { return s.contains("workers"); },
                                   std::chrono::seconds(30), "a STATUS reply");
  // (The bystander itself may be missing for a moment: its heartbeats queued behind the fuzz.)
  for (const auto& w : st["workers"])
    EXPECT_EQ(w.value("worker_id", ""), "w-bystander") << "the fuzzer registered as a worker: " << w.dump();
  // The frames queued before the fuzzer stopped are refused one by one; wait until the count of
  // refusals stands still over a STATUS long poll (which returns after a state change or 2 s).
  auto refusals = [&] { return ak::testing::metric_value(farm.scrape(), "autokernel_protocol_errors_total"); };
  const auto drain_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (double last = -1, now = refusals(); now != last && std::chrono::steady_clock::now() < drain_deadline;
       last = now, now = refusals()) {
    auto version = farm.client().status();
    if (version.ok()) (void)farm.client().status_after(version->version, std::chrono::seconds(2));
  }
  const int64_t rss_after_kb = proc_status_kb(pid, "VmRSS");
  const int64_t hwm_kb = proc_status_kb(pid, "VmHWM");
  std::printf(
      "coordinator VmRSS before %lld kB, when the fuzzer stopped %lld kB, after its frames were refused %lld kB "
      "(growth %lld kB), peak VmHWM %lld kB, %.0f s of fuzz\n",
      (long long)rss_before_kb, (long long)rss_at_end_kb, (long long)rss_after_kb,
      (long long)(rss_after_kb - rss_before_kb), (long long)hwm_kb, seconds);
  EXPECT_LT(rss_after_kb - rss_before_kb, 100 * 1000) << "coordinator RSS grew by more than 100 MB";

  // A normal campaign to its end on the bystander worker.
  std::string cid;
  const auto submit_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (cid.empty() && std::chrono::steady_clock::now() < submit_deadline) {
    auto r = farm.client().submit(ak::testing::quick_campaign(24, "after-fuzz"));
    if (r.ok())
      cid = r->campaign_id;
    else
      ASSERT_NE(r.status().message().find("too many requests"), std::string::npos) << r.status().message();
  }
  ASSERT_FALSE(cid.empty()) << "the coordinator took no campaign within 30 s";
  const auto done = farm.wait_campaign(cid, std::chrono::seconds(120));
  for (const auto& c : done["campaigns"])
    if (c["campaign_id"] == cid) {
      EXPECT_EQ(c["finished"], 24);
      EXPECT_EQ(c["pass"], 24);
    }
  // The refusals were counted.
  const std::string metrics = farm.scrape();
  EXPECT_GT(ak::testing::metric_value(metrics, "autokernel_protocol_errors_total", "OVERSIZED"), 0);
  EXPECT_GT(ak::testing::metric_value(metrics, "autokernel_protocol_errors_total", "MALFORMED"), 0);
  EXPECT_TRUE(farm.coordinator_pid() == pid);
}

}  // namespace
}  // namespace ak
