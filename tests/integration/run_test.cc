// `autokernel run` stopped part-way (issue 22, "Stopping is safe"): the real command as a real
// process, with its own private Redis, coordinator and CPU worker. SIGTERM to it alone, or SIGINT
// to its process group (what Ctrl-C does), in the middle of a campaign: it exits within 5 s with
// every finished row written, cancels the rest or keeps it (--keep-queue), and the next run in the
// folder reports what it found and appends to the same results.tsv. Nothing here sleeps: the test
// reads the run's output line by line and waits for its exit, each with a deadline.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/process.h"
#include "common/result_fields.h"
#include "coordinator/client.h"
#include "tests/integration/farm.h"

namespace ak::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::steady_clock;

// A campaign of CPU softmax jobs that runs for a while on one worker: every configuration with
// enough samples that a job takes some tens of milliseconds.
json long_campaign(int n_jobs, const std::string& name) {
  json c = quick_campaign(n_jobs, name);
  c["measure"] = {{"warmup", 2}, {"min_samples", 20}, {"max_samples", 50}, {"max_time_ms", 50}};
  return c;
}

// One `autokernel run` in `dir` (data dir dir/ak, out dir dir/out), leading its own process group
// as a shell job does. Its stdout is read line by line; stderr goes to a file.
class RunProcess {
 public:
  RunProcess(const fs::path& dir, const std::string& campaign_file, std::vector<std::string> extra, int n) {
    std::vector<std::string> argv = {bin("autokernel"),
                                     "--log-level",
                                     "warn",
                                     "run",
                                     "--campaign",
                                     campaign_file,
                                     "--backend",
                                     "cpu",
                                     "--cpu-workers",
                                     "1",
                                     "--data-dir",
                                     (dir / "ak").string(),
                                     "--out",
                                     (dir / "out").string(),
                                     "--metrics",
                                     "127.0.0.1:0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    ChildProcess::Options o;
    o.capture_stdout = true;
    o.new_process_group = true;
    o.output_path = (dir / ("run" + std::to_string(n) + ".err")).string();
    err_path_ = o.output_path;
    auto p = ChildProcess::spawn(argv, o);
    if (!p.ok()) throw std::runtime_error(p.status().message());
    p_ = std::move(*p);
  }

  // Reads lines until `pred` holds for one (true) or the output ends or the deadline passes.
  bool read_until(const std::function<bool(const std::string&)>& pred, steady_clock::time_point deadline) {
    while (steady_clock::now() < deadline) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady_clock::now());
      auto line = p_.read_line(std::max(ms, std::chrono::milliseconds(1)));
      if (!line.ok()) return false;  // EOF
      if (!line->has_value()) continue;
      lines_.push_back(**line);
      if (pred(**line)) return true;
    }
    return false;
  }
  // Reads to the end of the output, then waits for the exit; the exit code, or nullopt when it
  // had not exited by `deadline`.
  std::optional<int> finish(steady_clock::time_point deadline) {
    read_until([](const std::string&) { return false; }, deadline);
    return p_.wait_until(deadline);
  }
  // The highest n of a progress line "[n/total] ..." so far.
  int64_t progress() const {
    static const std::regex re(R"(^\[(\d+)/(\d+)\])");
    int64_t best = -1;
    std::smatch m;
    for (const auto& l : lines_)
      if (std::regex_search(l, m, re)) best = std::max<int64_t>(best, std::stoll(m[1]));
    return best;
  }
  std::string printed() const {
    std::string s;
    for (const auto& l : lines_) s += l + "\n";
    return s + "--- stderr:\n" + read_text(err_path_);
  }
  const std::vector<std::string>& lines() const { return lines_; }
  pid_t pid() const { return p_.pid(); }

 private:
  ChildProcess p_;
  std::vector<std::string> lines_;
  std::string err_path_;
};

// The rows of results.tsv as column -> cell, and how many header lines it has.
std::vector<std::map<std::string, std::string>> tsv_rows(const fs::path& file, int* headers) {
  std::vector<std::string> cols;
  for (const auto& c : result_columns()) cols.push_back(c.name);
  std::istringstream in(read_text(file.string()));
  std::vector<std::map<std::string, std::string>> rows;
  *headers = 0;
  for (std::string line; std::getline(in, line);) {
    if (line == tsv_header()) {
      ++*headers;
      continue;
    }
    std::map<std::string, std::string> row;
    std::istringstream cs(line);
    size_t i = 0;
    for (std::string cell; std::getline(cs, cell, '\t') && i < cols.size(); ++i) row[cols[i]] = cell;
    rows.push_back(row);
  }
  return rows;
}

// "campaign <id> (<name>): F of T jobs finished[ (and M more stored in <dir> after the rows were
// exported)], L left: <what was done>" from the run's output. F counts the rows in results.tsv; M
// the results that reached the store from a killed worker after they were fetched.
struct StopLine {
  std::string campaign_id;
  int64_t finished = -1, total = -1, more = 0;
  std::string action;
};
std::optional<StopLine> stop_line(const RunProcess& run) {
  static const std::regex re(
      R"(^campaign (\S+) \(.*\): (\d+) of (\d+) jobs finished(?: \(and (\d+) more stored in .*\))?, \d+ left: (.*)$)");
  std::smatch m;
  for (const auto& l : run.lines())
    if (std::regex_match(l, m, re))
      return StopLine{m[1], std::stoll(m[2]), std::stoll(m[3]), m[4].matched ? std::stoll(m[4]) : 0, m[5]};
  return std::nullopt;
}

class RunCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Short: the private Redis's unix socket lies under it (107 bytes at most).
    static int tests = 0;
    dir_ = fs::path(::testing::TempDir()) / ("run" + std::to_string(getpid()) + "-" + std::to_string(++tests));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  std::string campaign_file(const json& c, const std::string& name) {
    const std::string path = (dir_ / (name + ".json")).string();
    std::ofstream(path) << c.dump();
    return path;
  }
  // Starts a run of `campaign`, waits until at least `min_finished` of its jobs are done, sends
  // the signal (to the run alone, or to its process group) and checks that it exits within 5 s
  // with 128 + the signal. Returns the run with all its output read.
  // With `like_timeout`, the signal goes to the run and then to its group from this one process,
  // as coreutils `timeout` sends it: one request, not "stop now".
  std::unique_ptr<RunProcess> run_and_stop(const std::string& campaign, std::vector<std::string> extra, int sig,
                                           bool to_group, int64_t* seen_before_signal, bool like_timeout = false) {
    auto run = std::make_unique<RunProcess>(dir_, campaign, std::move(extra), ++runs_);
    const bool mid = run->read_until([&](const std::string&) { return run->progress() >= 5; },
                                     steady_clock::now() + std::chrono::seconds(120));
    if (!mid) {
      ADD_FAILURE() << "no progress line with 5 finished jobs:\n" << run->printed();
      return nullptr;
    }
    *seen_before_signal = run->progress();
    const auto sent = steady_clock::now();
    EXPECT_EQ(to_group ? ::kill(-run->pid(), sig) : ::kill(run->pid(), sig), 0);
    if (like_timeout) {
      EXPECT_EQ(::kill(-run->pid(), sig), 0);
    }
    const auto rc = run->finish(sent + std::chrono::seconds(5));
    const double took = std::chrono::duration<double>(steady_clock::now() - sent).count();
    EXPECT_TRUE(rc.has_value()) << "still running 5 s after the signal:\n" << run->printed();
    if (rc) {
      EXPECT_EQ(*rc, 128 + sig) << run->printed();
    }
    EXPECT_LT(took, 5.0) << run->printed();
    std::cout << "stopped in " << took << " s\n";
    return run;
  }

  fs::path dir_;
  int runs_ = 0;
};

// SIGTERM to `run` alone: every finished row is in results.tsv and results.json (checked against
// the farm's own store, read by a coordinator started afterwards on the same data dir), the rest
// of the campaign is cancelled, and a second run appends its rows to the same files with the
// experiment number going on. The signal is sent as `timeout` sends it (to the run, then to its
// group, both from one process): an orderly stop, not the second signal's "stop now".
TEST_F(RunCommandTest, SigtermMidCampaignStopsWithin5sWritesEveryFinishedRowAndCancelsTheRest) {
  const std::string big = campaign_file(long_campaign(480, "long"), "long");
  int64_t seen = 0;
  auto first = run_and_stop(big, {}, SIGTERM, /*to_group=*/false, &seen, /*like_timeout=*/true);
  ASSERT_NE(first, nullptr);
  const std::string out = first->printed();
  EXPECT_NE(out.find("SIGTERM: stopping"), std::string::npos) << out;
  const auto stop = stop_line(*first);
  ASSERT_TRUE(stop.has_value()) << "no line saying what became of the campaign:\n" << out;
  EXPECT_GE(stop->finished, seen);
  EXPECT_LT(stop->finished, stop->total) << "the campaign ended before the signal; make it longer";
  EXPECT_EQ(stop->action.rfind("cancelled", 0), 0u) << out;

  int headers = 0;
  auto rows = tsv_rows(dir_ / "out" / "results.tsv", &headers);
  EXPECT_EQ(headers, 1);
  EXPECT_EQ(int64_t(rows.size()), stop->finished) << out;
  const json js = json::parse(read_text((dir_ / "out" / "results.json").string()));
  EXPECT_EQ(js.size(), rows.size());

  // What the store holds: a coordinator on the same data dir (its private Redis replays the AOF).
  {
    ChildProcess::Options o;
    o.capture_stdout = true;
    o.output_path = (dir_ / "check-coordinator.err").string();
    auto c = ChildProcess::spawn(
        {bin("autokernel"), "--log-level", "warn", "coordinator", "--data-dir", (dir_ / "ak").string(),
         "--workers-bind", "tcp://127.0.0.1:*", "--clients-bind", "tcp://127.0.0.1:*", "--metrics", ""},
        o);
    ASSERT_TRUE(c.ok()) << c.status().message();
    auto line = c->wait_for_line("READY ", std::chrono::seconds(30));
    ASSERT_TRUE(line.ok()) << line.status().message();
    const auto ready = json::parse(*line);
    CoordinatorClient client(ready["clients"].get<std::string>(), std::chrono::seconds(10));
    auto stored = client.results(stop->campaign_id, "");
    ASSERT_TRUE(stored.ok()) << stored.status().message();
    std::set<std::string> done, exported;
    for (const auto& r : stored->rows)
      if (r.correctness != "CANCELLED") done.insert(r.job_id);
    for (const auto& r : rows) exported.insert(r.at("job_id"));
    // Every row the farm stored before it stopped, and no other; a result that reached the store
    // after the export is one the stop line counted as "more stored".
    EXPECT_TRUE(std::includes(done.begin(), done.end(), exported.begin(), exported.end()))
        << "results.tsv holds a row the farm did not store";
    EXPECT_EQ(int64_t(done.size()), int64_t(exported.size()) + stop->more)
        << "results.tsv must hold every row the farm stored before it stopped";
    auto st = client.status();
    ASSERT_TRUE(st.ok());
    for (const auto& cr : st->campaigns)
      if (cr.campaign_id == stop->campaign_id) {
        EXPECT_TRUE(cr.cancelled);
      }
    c->stop(std::chrono::seconds(10));
  }

  // A second run in the folder: nothing left over to report, its rows appended.
  const std::string small = campaign_file(quick_campaign(24, "small"), "small");
  RunProcess second(dir_, small, {}, ++runs_);
  const auto rc = second.finish(steady_clock::now() + std::chrono::seconds(180));
  ASSERT_EQ(rc, std::optional<int>(0)) << second.printed();
  EXPECT_EQ(second.printed().find("unfinished campaign"), std::string::npos) << second.printed();
  rows = tsv_rows(dir_ / "out" / "results.tsv", &headers);
  EXPECT_EQ(headers, 1);
  ASSERT_EQ(int64_t(rows.size()), stop->finished + 24) << second.printed();
  for (size_t i = 1; i < rows.size(); ++i)
    EXPECT_LT(std::stoll(rows[i - 1].at("experiment")), std::stoll(rows[i].at("experiment"))) << "row " << i;
  const json js2 = json::parse(read_text((dir_ / "out" / "results.json").string()));
  ASSERT_EQ(js2.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(js2[i]["job_id"], rows[i].at("job_id"));
}

// SIGINT to the process group, as Ctrl-C in a terminal: with --keep-queue the unfinished campaign
// stays queued; the next run in the folder says so, resumes it, and between the two runs
// results.tsv holds each of its jobs exactly once.
TEST_F(RunCommandTest, SigintToTheProcessGroupKeepsTheQueueAndTheNextRunReportsAndResumesIt) {
  const std::string big = campaign_file(long_campaign(96, "long"), "long");
  int64_t seen = 0;
  auto first = run_and_stop(big, {"--keep-queue"}, SIGINT, /*to_group=*/true, &seen);
  ASSERT_NE(first, nullptr);
  const std::string out = first->printed();
  EXPECT_NE(out.find("SIGINT: stopping"), std::string::npos) << out;
  const auto stop = stop_line(*first);
  ASSERT_TRUE(stop.has_value()) << out;
  EXPECT_GE(stop->finished, seen);
  EXPECT_LT(stop->finished, stop->total) << "the campaign ended before the signal; make it longer";
  EXPECT_EQ(stop->action.rfind("kept in the queue", 0), 0u) << out;
  int headers = 0;
  EXPECT_EQ(int64_t(tsv_rows(dir_ / "out" / "results.tsv", &headers).size()), stop->finished);

  const std::string small = campaign_file(quick_campaign(24, "small"), "small");
  RunProcess second(dir_, small, {}, ++runs_);
  const auto rc = second.finish(steady_clock::now() + std::chrono::seconds(300));
  const std::string out2 = second.printed();
  ASSERT_EQ(rc, std::optional<int>(0)) << out2;
  EXPECT_NE(out2.find("found 1 unfinished campaign(s) of an earlier run"), std::string::npos) << out2;
  EXPECT_NE(out2.find(stop->campaign_id + " (long): " + std::to_string(stop->total - stop->finished - stop->more) +
                      " of " + std::to_string(stop->total) + " jobs left"),
            std::string::npos)
      << out2;
  EXPECT_NE(out2.find("resuming them"), std::string::npos) << out2;

  const auto rows = tsv_rows(dir_ / "out" / "results.tsv", &headers);
  EXPECT_EQ(headers, 1);
  std::map<std::string, int> per_job;
  int64_t of_first = 0;
  for (const auto& r : rows) {
    ++per_job[r.at("job_id")];
    of_first += r.at("campaign_id") == stop->campaign_id;
  }
  EXPECT_EQ(of_first, stop->total) << out2;
  EXPECT_EQ(rows.size(), size_t(stop->total + 24)) << out2;
  for (const auto& [job, n] : per_job) EXPECT_EQ(n, 1) << job;
  for (size_t i = 1; i < rows.size(); ++i)
    EXPECT_LT(std::stoll(rows[i - 1].at("experiment")), std::stoll(rows[i].at("experiment"))) << "row " << i;
  const json js = json::parse(read_text((dir_ / "out" / "results.json").string()));
  ASSERT_EQ(js.size(), rows.size());
}

// A second signal means "stop now": the run ends at once, its farm with it (their death signal),
// and the data dir is left as a killed run leaves it: the next run finds the campaign. The second
// comes from another process (`kill`), as a second request does; one sender's double signal is
// one request (above). It is sent once the run has said it is stopping: a standard signal does not
// queue, so a second SIGINT that arrives while the first is still pending merges into it (seen
// once in CI on a loaded 2-core machine: a graceful stop of 3.4 s).
TEST_F(RunCommandTest, ASecondSignalStopsAtOnce) {
  const std::string big = campaign_file(long_campaign(480, "long"), "long");
  RunProcess run(dir_, big, {}, ++runs_);
  ASSERT_TRUE(run.read_until([&](const std::string&) { return run.progress() >= 1; },
                             steady_clock::now() + std::chrono::seconds(120)))
      << run.printed();
  ASSERT_EQ(::kill(-run.pid(), SIGINT), 0);
  ASSERT_TRUE(run.read_until(
      [](const std::string& line) { return line.find("a second stop signal ends it at once") != std::string::npos; },
      steady_clock::now() + std::chrono::seconds(30)))
      << run.printed();
  const auto sent = steady_clock::now();
  auto second = ChildProcess::spawn({"kill", "-INT", std::to_string(run.pid())}, SpawnOptions{});
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ(second->wait(), 0);
  const auto rc = run.finish(sent + std::chrono::seconds(5));
  ASSERT_TRUE(rc.has_value()) << run.printed();
  EXPECT_EQ(*rc, 128 + SIGINT) << run.printed();
  // At once: the orderly stop's last step (the rows written, after the workers' grace, the
  // requests and the cancel of some 470 queued jobs) never came, and the exit took seconds less
  // than an orderly stop may.
  const std::string out = run.printed();
  const std::string after = out.substr(out.find("a second stop signal ends it at once"));
  EXPECT_EQ(after.find("wrote "), std::string::npos) << out;
  EXPECT_LT(std::chrono::duration<double>(steady_clock::now() - sent).count(), 3.0) << out;

  const std::string small = campaign_file(quick_campaign(24, "small"), "small");
  RunProcess next(dir_, small, {"--cancel-leftover"}, ++runs_);
  ASSERT_EQ(next.finish(steady_clock::now() + std::chrono::seconds(180)), std::optional<int>(0)) << next.printed();
  EXPECT_NE(next.printed().find("found 1 unfinished campaign(s) of an earlier run"), std::string::npos)
      << next.printed();
  EXPECT_NE(next.printed().find("(--cancel-leftover): "), std::string::npos) << next.printed();
  int headers = 0;
  EXPECT_EQ(tsv_rows(dir_ / "out" / "results.tsv", &headers).size(), 24u) << next.printed();
}

// A campaign for a GPU that none of the run's own workers has (softmax_h200.toml on an H100, as
// bench/throughput.sh once ran it) would wait forever for a worker that will never come: once its
// workers have connected, the run cancels the campaign, says what the jobs need and what the
// workers offer, and exits 1.
TEST_F(RunCommandTest, ACampaignNoWorkerOfTheRunCanServeIsCancelledWithTheReasonInsteadOfWaitingForever) {
  json c = quick_campaign(24, "for-an-h200");
  c["requires"] = {{"gpu_model", "NVIDIA H200"}};
  const std::string file = campaign_file(c, "h200");
  RunProcess run(dir_, file, {}, ++runs_);
  const auto rc = run.finish(steady_clock::now() + std::chrono::seconds(60));
  ASSERT_TRUE(rc.has_value()) << "still waiting after 60 s:\n" << run.printed();
  EXPECT_EQ(*rc, 1) << run.printed();
  const std::string out = run.printed();
  EXPECT_NE(out.find("24 queued jobs need gpu_model NVIDIA H200, and no worker of this run offers it"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("cancelling campaign"), std::string::npos) << out;
  EXPECT_NE(out.find("-cpu0 (cpu "), std::string::npos) << "the workers it had are named:\n" << out;
  // The jobs' rows say what became of them.
  int headers = 0;
  const auto rows = tsv_rows(dir_ / "out" / "results.tsv", &headers);
  EXPECT_EQ(rows.size(), 24u) << out;
  for (const auto& r : rows) EXPECT_EQ(r.at("correctness"), "CANCELLED");
}

// A model run whose only worker cannot start (here: an autokernel copied away from its sandbox)
// ends, saying why, instead of waiting for the profile job forever (found on the GPU machine,
// where a worker that could not confine a child left `run --model` waiting 300 s).
TEST_F(RunCommandTest, AModelRunEndsWhenEveryWorkerHasExited) {
  const fs::path lone = dir_ / "lone";
  fs::create_directories(lone);
  fs::copy_file(bin("autokernel"), lone / "autokernel");
  ChildProcess::Options o;
  o.output_path = (dir_ / "lone.out").string();
  o.new_process_group = true;
  auto run = ChildProcess::spawn(
      {(lone / "autokernel").string(), "--log-level", "warn", "run", "--model",
       std::string(AK_SOURCE_DIR) + "/tests/models/models/small_cnn.py", "--backend", "cpu", "--data-dir",
       (dir_ / "ak").string(), "--out", (dir_ / "out").string(), "--metrics", "127.0.0.1:0"},
      o);
  ASSERT_TRUE(run.ok()) << run.status().message();
  const auto rc = run->wait_for(std::chrono::seconds(120));
  const std::string printed = read_text(o.output_path);
  ASSERT_TRUE(rc.has_value()) << "still waiting 120 s later:\n" << printed;
  EXPECT_EQ(*rc, 1) << printed;
  EXPECT_NE(printed.find("cannot start sandbox"), std::string::npos) << printed;
  EXPECT_NE(printed.find("autokernel run: every worker has exited (worker 0: exit code 1)"), std::string::npos)
      << printed;
  EXPECT_NE(printed.find("no worker left: stopping"), std::string::npos) << printed;
}

}  // namespace
}  // namespace ak::testing
