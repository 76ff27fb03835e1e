// The worker daemon's /metrics (worker/metrics.h): what a scrape returns, served over HTTP.
#include "worker/metrics.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "common/metric_names.h"

namespace ak {
namespace {

namespace mn = metric_names;

const prometheus::MetricFamily* find(const std::vector<prometheus::MetricFamily>& fs, const std::string& name) {
  for (const auto& f : fs)
    if (f.name == name) return &f;
  return nullptr;
}

std::string label(const prometheus::ClientMetric& m, const std::string& name) {
  for (const auto& l : m.label)
    if (l.name == name) return l.value;
  return "";
}

TEST(WorkerMetricsTest, AScrapeReadsTheStatsOfEachDevice) {
  WorkerMetrics metrics;
  auto stats = std::make_shared<WorkerStats>();
  stats->finish(ResultStatus::kPass);
  stats->finish(ResultStatus::kPass);
  stats->finish(ResultStatus::kCompileError);
  stats->jobs_held = 3;
  stats->compile_queue = 2;
  stats->sandbox_restarts = 1;
  stats->compile_cache_hits = 5;
  stats->compile_cache_misses = 4;
  metrics.add_device("cpu", "cpu", stats, nullptr);
  const auto fs = metrics.collect();

  const auto* finished = find(fs, mn::kWorkerJobsFinished);
  ASSERT_NE(finished, nullptr);
  double pass = -1, compile_error = -1;
  for (const auto& m : finished->metric) {
    EXPECT_EQ(label(m, "device"), "cpu");
    if (label(m, "status") == "PASS") pass = m.counter.value;
    if (label(m, "status") == "COMPILE_ERROR") compile_error = m.counter.value;
  }
  EXPECT_EQ(pass, 2);
  EXPECT_EQ(compile_error, 1);
  EXPECT_EQ(finished->metric.size(), static_cast<size_t>(ResultStatus::kCancelled) + 1) << "every status, 0 included";
  EXPECT_EQ(find(fs, mn::kWorkerJobsHeld)->metric.at(0).gauge.value, 3);
  EXPECT_EQ(find(fs, mn::kWorkerCompileQueue)->metric.at(0).gauge.value, 2);
  EXPECT_EQ(find(fs, mn::kWorkerSandboxRestarts)->metric.at(0).counter.value, 1);
  EXPECT_EQ(find(fs, mn::kWorkerCacheHits)->metric.at(0).counter.value, 5);
  EXPECT_EQ(find(fs, mn::kWorkerCacheMisses)->metric.at(0).counter.value, 4);
}

TEST(WorkerMetricsTest, ADeviceWithoutNvmlExportsNoGpuSeries) {
  WorkerMetrics metrics;
  metrics.add_device("0", "NVIDIA H100", std::make_shared<WorkerStats>(), nullptr);
  for (const auto& f : metrics.collect())
    EXPECT_EQ(f.name.rfind("autokernel_gpu_", 0), std::string::npos) << f.name << " without NVML";
}

TEST(WorkerMetricsTest, ServesTheSeriesOverHttpOnAnEphemeralLoopbackPort) {
  WorkerMetrics metrics;
  metrics.add_device("cpu", "cpu", std::make_shared<WorkerStats>(), nullptr);
  ASSERT_TRUE(metrics.serve("127.0.0.1:0").ok());
  ASSERT_GT(metrics.port(), 0);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(metrics.port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string req = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
  ASSERT_EQ(write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  std::string body;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) body.append(buf, static_cast<size_t>(n));
  close(fd);
  EXPECT_NE(body.find("autokernel_worker_jobs_held{device=\"cpu\"} 0"), std::string::npos) << body;
}

TEST(WorkerMetricsTest, AnAddressThatCannotBeBoundIsAnError) {
  WorkerMetrics first, second;
  ASSERT_TRUE(first.serve("127.0.0.1:0").ok());
  const Status s = second.serve("127.0.0.1:" + std::to_string(first.port()));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--metrics"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace ak
