// The results table and its order (cli/format.h): shapes by their numbers, best first, --limit;
// the exports that runs append to.
#include "cli/format.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "common/result_fields.h"

namespace ak::cli {
namespace {

protocol::ResultRow row(const std::string& shape, double speedup, const std::string& config) {
  protocol::ResultRow r;
  r.campaign_id = "c";
  r.kernel_type = "softmax";
  r.shape = shape;
  r.dtype = "fp32";
  r.correctness = "PASS";
  r.speedup_vs_pytorch = speedup;
  r.config = config;
  r.job_id = "c-" + shape + "-" + config;
  return r;
}

TEST(FormatResults, OrdersShapesByTheirNumbersBestFirstAndHonoursTheLimit) {
  const std::vector<protocol::ResultRow> rows = {row("1024x64", 1.0, "A"), row("128x64", 0.5, "B"),
                                                 row("128x64", 2.0, "C"), row("64x64", 1.0, "D")};
  const auto all = ordered_results(rows, 0);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].config, "D");  // 64 < 128 < 1024, which text order would not give
  EXPECT_EQ(all[1].config, "C");  // the better of the two 128x64 rows first
  EXPECT_EQ(all[2].config, "B");
  EXPECT_EQ(all[3].config, "A");
  EXPECT_EQ(ordered_results(rows, 2).size(), 2u);
}

TEST(FormatResults, NoConfigIsCutAndTheKernelIsNamed) {
  const std::string config = "AK_ONLINE=0,AK_ROWS_PER_TILE=1,AK_VEC=8,AK_THREADS=256";
  const std::string table = format_results({row("64x64", 1.0, config)}, 0);
  EXPECT_NE(table.find(config), std::string::npos) << table;
  EXPECT_NE(table.find("softmax"), std::string::npos) << table;
  EXPECT_NE(table.find("kernel"), std::string::npos) << table;
}

TEST(FormatResults, ACacheResidentRowIsMarkedAndShowsNoPercentOfPeak) {
  protocol::ResultRow dram = row("4096x4096", 1.0, "A");
  dram.pct_peak = 71.5;
  dram.cache_resident = false;
  protocol::ResultRow cached = row("64x64", 1.0, "B");
  cached.cache_resident = true;  // memory-bound: result_row leaves pct_peak null
  const std::string table = format_results({dram, cached}, 0);
  EXPECT_NE(table.find("71.5"), std::string::npos) << table;
  std::istringstream in(table);
  std::string line;
  int marked = 0;
  while (std::getline(in, line))
    if (line.find("c-64x64-B") != std::string::npos) {
      ++marked;
      EXPECT_NE(line.find("(cache)"), std::string::npos) << line;
    } else if (line.find("c-4096x4096-A") != std::string::npos) {
      EXPECT_EQ(line.find("(cache)"), std::string::npos) << line;
    }
  EXPECT_EQ(marked, 1) << table;
  EXPECT_NE(table.find("1 of 2 rows were timed with their working set in the last-level cache"), std::string::npos)
      << table;
}

// A folder of its own per test, removed at the end.
class FormatExports : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::path(::testing::TempDir()) / ("append_exports_" + std::to_string(getpid()) + "_" +
                                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string tsv() const { return (dir_ / "results.tsv").string(); }
  std::string js() const { return (dir_ / "results.json").string(); }
  static std::string text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // The TSV's lines after the header, and the number of header lines.
  std::vector<std::string> tsv_rows(int* headers) const {
    std::istringstream in(text(tsv()));
    std::vector<std::string> rows;
    *headers = 0;
    for (std::string l; std::getline(in, l);) {
      if (l == tsv_header())
        ++*headers;
      else
        rows.push_back(l);
    }
    return rows;
  }
  static protocol::ResultRow numbered(const std::string& job, int64_t experiment) {
    protocol::ResultRow r = row("64x64", 1.0, job);
    r.job_id = job;
    r.experiment = experiment;
    return r;
  }
  std::filesystem::path dir_;
};

TEST_F(FormatExports, ASecondRunAppendsItsRowsUnderTheOneHeaderAndJsonHoldsTheSameRows) {
  ASSERT_EQ(*append_exports({numbered("a", 1), numbered("b", 2)}, tsv(), js()), 2u);
  // The second run's rows, one of them already written (a resumed campaign's row).
  ASSERT_EQ(*append_exports({numbered("d", 4), numbered("b", 2), numbered("c", 3)}, tsv(), js()), 2u);
  int headers = 0;
  const auto rows = tsv_rows(&headers);
  EXPECT_EQ(headers, 1);
  ASSERT_EQ(rows.size(), 4u);
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i].substr(0, rows[i].find('\t')), std::to_string(i + 1));
  const auto j = nlohmann::json::parse(text(js()));
  ASSERT_EQ(j.size(), 4u);
  for (size_t i = 0; i < j.size(); ++i) EXPECT_EQ(j[i]["experiment"], int64_t(i + 1));
  EXPECT_EQ(j[2]["job_id"], "c");
}

TEST_F(FormatExports, NumbersOfAnotherDataDirGoOnAfterTheFilesLast) {
  ASSERT_TRUE(append_exports({numbered("a", 1), numbered("b", 2)}, tsv(), js()).ok());
  ASSERT_TRUE(append_exports({numbered("x", 1), numbered("y", 3)}, tsv(), js()).ok());
  const auto j = nlohmann::json::parse(text(js()));
  ASSERT_EQ(j.size(), 4u);
  EXPECT_EQ(j[2]["experiment"], 3);
  EXPECT_EQ(j[3]["experiment"], 5);  // the gap kept
}

TEST_F(FormatExports, AFileWithAnotherHeaderIsRefusedAndLeftAsItWas) {
  std::ofstream(tsv()) << "experiment\ttag\tkernel\n1\t\tsoftmax\n";
  const std::string before = text(tsv());
  auto r = append_exports({numbered("a", 1)}, tsv(), js());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("column 3 is 'kernel', expected 'kernel_type'"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("--out"), std::string::npos) << r.status().message();
  EXPECT_EQ(text(tsv()), before);
  EXPECT_FALSE(std::filesystem::exists(js()));
}

}  // namespace
}  // namespace ak::cli

namespace ak::cli {
namespace {

TEST(Progress, IntoAPipeALineAtMostEveryIntervalWhileProgressMovesAndAlwaysTheLast) {
  ProgressThrottle pipe(false, 2.0);
  EXPECT_TRUE(pipe.should_print(0, false, 0.0));   // the first line
  EXPECT_FALSE(pipe.should_print(3, false, 0.5));  // moved, too soon
  EXPECT_FALSE(pipe.should_print(9, false, 1.9));
  EXPECT_TRUE(pipe.should_print(9, false, 2.0));   // moved since the last printed line
  EXPECT_FALSE(pipe.should_print(9, false, 9.0));  // nothing moved: nothing new to say
  EXPECT_TRUE(pipe.should_print(10, true, 9.1));   // the end, however soon
  // A campaign of thousands of jobs finishing one every millisecond for 10 s: 6 lines, not 10,001.
  ProgressThrottle busy(false, 2.0);
  int printed = 0;
  for (int i = 0; i <= 10'000; ++i) printed += busy.should_print(i, i == 10'000, i / 1000.0);
  EXPECT_EQ(printed, 6);  // t = 0, 2, 4, 6, 8 and the end at t = 10
  ProgressThrottle tty(true, 2.0);
  EXPECT_TRUE(tty.should_print(0, false, 0.0));
  EXPECT_TRUE(tty.should_print(0, false, 0.1));  // redrawn in place: rate and ETA change
}

TEST(Progress, AStudyCampaignShowsItsStudiesAndTheirEtaNotAJobCount) {
  protocol::CampaignRow c;
  c.is_study = true;
  c.total = 12;  // trials proposed so far: not a meaningful denominator
  c.finished = 10;
  c.pass = 9;
  c.failed = 1;
  protocol::StudyRow a, b;
  a.done = true;
  b.eta_s = 95;
  c.studies = {a, b};
  const std::string line = progress_line(c, 30);
  EXPECT_EQ(line.rfind("[studies 1/2] trials 10  pass 9  not-pass 1  best -  ETA 1m35s", 0), 0u) << line;
  c.studies[1].eta_s = -1;
  EXPECT_NE(progress_line(c, 30).find("ETA ?"), std::string::npos);
  c.studies[1].done = true;
  EXPECT_NE(progress_line(c, 30).find("[studies 2/2]"), std::string::npos);
  EXPECT_NE(progress_line(c, 30).find("ETA 0s"), std::string::npos);

  protocol::CampaignRow k;
  k.total = 100;
  k.finished = 25;
  k.pass = 25;
  EXPECT_EQ(progress_line(k, 5), "[25/100] pass 25  not-pass 0  best -  5.0 jobs/s  ETA 15s");
}

}  // namespace
}  // namespace ak::cli

namespace ak::cli {
namespace {

TEST(CampaignSummary, SaysHowTheCampaignEndedItsBestAndTheCommandsToRunNext) {
  protocol::CampaignRow c;
  c.campaign_id = "c1";
  c.name = "softmax-smoke";
  c.total = 12;
  c.finished = 12;
  c.pass = 11;
  c.failed = 1;
  c.complete = true;
  c.best = protocol::CampaignBest{};
  c.best->speedup = 1.25;
  c.best->shape = "4096x4096";
  c.best->dtype = "fp16";
  c.best->config = "AK_VEC=4";
  const std::string s = campaign_summary(c, " --client tcp://h:5556");
  EXPECT_EQ(s.rfind("campaign c1 (softmax-smoke) is done: 12 of 12 jobs finished, 11 PASS, 1 not PASS\n", 0), 0u) << s;
  EXPECT_NE(s.find("best: 1.250x over PyTorch at 4096x4096 fp16 AK_VEC=4\n"), std::string::npos) << s;
  EXPECT_NE(s.find("next: autokernel results --client tcp://h:5556 --campaign c1"), std::string::npos) << s;
  EXPECT_NE(s.find("autokernel export --client tcp://h:5556 --campaign c1"), std::string::npos) << s;
  EXPECT_NE(s.find("autokernel best --client tcp://h:5556"), std::string::npos) << s;

  c.best.reset();
  c.pass = 0;
  c.failed = 3;
  c.finished = 3;
  c.complete = true;
  c.cancelled = true;
  c.cancelled_jobs = 9;
  c.cancel_reason = "by alice";
  const std::string t = campaign_summary(c, "");
  EXPECT_NE(t.find("was cancelled: by alice: 3 of 12 jobs finished, 0 PASS, 3 not PASS, 9 cancelled"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("no job has passed; the reasons are in the rows"), std::string::npos) << t;
  EXPECT_EQ(t.find("autokernel best"), std::string::npos) << t;
}

}  // namespace
}  // namespace ak::cli
