// docs/RESULTS.md names every column and key the code writes in results.tsv, results.json and
// tuning.json, so the page cannot fall behind the code.
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "common/protocol.h"
#include "common/result_fields.h"
#include "common/tuning.h"
#include "tests/common/records.h"

namespace ak {
namespace {

std::string page() {
  std::ifstream in(std::string(AK_SOURCE_DIR) + "/docs/RESULTS.md");
  EXPECT_TRUE(in) << "docs/RESULTS.md is missing";
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void expect_named(const std::string& text, const std::string& key, const std::string& where) {
  EXPECT_NE(text.find("`" + key + "`"), std::string::npos)
      << "docs/RESULTS.md does not name " << where << " `" << key << "`";
}

TEST(ResultsDoc, NamesEveryTsvColumn) {
  const std::string text = page();
  ASSERT_FALSE(result_columns().empty());
  for (const auto& c : result_columns()) expect_named(text, c.name, "the results.tsv column");
}

TEST(ResultsDoc, NamesEveryKeyOfAResultsJsonRow) {
  const std::string text = page();
  JobRecord job = testing::sample_job();
  ResultRecord r = testing::sample_result();
  r.status = ResultStatus::kPass;
  // Every optional part present: a KernelBench task and a model profile.
  job.spec.kernelbench = KernelBenchTask{};
  job.spec.model = ModelTask{};
  r.model = nlohmann::json::object();
  const nlohmann::json row = result_row(job, r, 1);
  for (const char* optional : {"cache_resident", "kernelbench", "model"})
    EXPECT_TRUE(row.contains(optional)) << optional;
  for (const auto& [key, value] : row.items()) expect_named(text, key, "the results.json key");
  for (const auto& [key, value] : row["kernelbench"]["task"].items())
    expect_named(text, key, "the results.json kernelbench.task key");
}

TEST(ResultsDoc, NamesEveryKeyOfTuningJson) {
  const std::string text = page();
  protocol::BestReply doc;
  doc.entries = {testing::sample_tuned()};
  const nlohmann::json j = doc;
  for (const auto& [key, value] : j.items()) expect_named(text, key, "the tuning.json key");
  const nlohmann::json& entry = j["entries"][0];
  for (const auto& [key, value] : entry.items()) expect_named(text, key, "the tuning.json entry key");
  ASSERT_TRUE(entry["measurement"].is_object());
  for (const auto& [key, value] : entry["measurement"].items())
    expect_named(text, key, "the tuning.json measurement key");
  ASSERT_TRUE(entry["provenance"].is_object());
  for (const auto& [key, value] : entry["provenance"].items())
    expect_named(text, key, "the tuning.json provenance key");
}

}  // namespace
}  // namespace ak
