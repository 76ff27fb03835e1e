#include "common/tuning.h"

#include <gtest/gtest.h>

#include "tests/common/records.h"

namespace ak {
namespace {

using testing::as_json;
using testing::sample_job;
using testing::sample_result;
using testing::sample_tuned;

TEST(Tuning, APassingResultMakesAnEntryWithItsProvenance) {
  const TunedEntry e = sample_tuned(9.5);
  EXPECT_EQ(e.kernel_type, "softmax");
  EXPECT_EQ(e.backend, Backend::kCuda);
  EXPECT_EQ(e.gpu_model, "NVIDIA H200");
  EXPECT_EQ(e.dtype, DType::kBF16);
  EXPECT_EQ(e.shape, (std::vector<int64_t>{1024, 4096}));
  EXPECT_EQ(e.config, (std::map<std::string, int64_t>{{"BLOCK", 256}, {"VEC", 4}}));
  EXPECT_EQ(e.m.latency_us, 9.5);
  EXPECT_EQ(e.job_id, "job-1");
  EXPECT_EQ(e.campaign_id, "camp-1");
  EXPECT_EQ(e.worker_id, "w-gpu-node-3-2");
  EXPECT_EQ(e.arch, "sm_90a");
  EXPECT_EQ(e.versions.at("torch"), "2.11.0+cu130");
  EXPECT_EQ(e.versions.at("nvidia_driver"), "580.159.04");
  EXPECT_EQ(e.date, "2023-11-14T22:13:20Z");
  EXPECT_FALSE(e.source.empty());
}

TEST(Tuning, OnlyPassingResultsWithALatencyMakeEntries) {
  ResultRecord r = sample_result();
  EXPECT_FALSE(tuned_entry_from(sample_job(), r, nullptr)) << "a TIMEOUT row";
  r.status = ResultStatus::kPass;
  r.m.latency_us = 0;
  EXPECT_FALSE(tuned_entry_from(sample_job(), r, nullptr)) << "no latency";
  r.m.latency_us = 3;
  auto e = tuned_entry_from(sample_job(), r, nullptr);
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->versions.empty()) << "an unknown worker leaves the versions empty";
}

TEST(Tuning, TheKeyIgnoresTheCaseOfTheGpuModel) {
  TunedEntry a = sample_tuned();
  TunedEntry b = a;
  b.gpu_model = "nvidia h200";
  EXPECT_EQ(tuning_key(a), tuning_key(b));
  EXPECT_EQ(tuning_key(a), "softmax|cuda|nvidia h200|bf16|1024x4096");
}

TEST(Tuning, OnlyAStrictlyFasterEntryReplaces) {
  EXPECT_TRUE(replaces(sample_tuned(9), sample_tuned(10)));
  EXPECT_FALSE(replaces(sample_tuned(10), sample_tuned(10)));
  EXPECT_FALSE(replaces(sample_tuned(11), sample_tuned(10)));
}

TEST(Tuning, AnExportParsesBackToTheSameEntriesSortedByKey) {
  TunedEntry a = sample_tuned(12);
  TunedEntry b = a;
  b.shape = {8, 128};
  const nlohmann::json doc = tuning_export({a, b}, 1'700'000'000'000);
  EXPECT_EQ(doc["format"], 1);
  EXPECT_EQ(doc["exported"], "2023-11-14T22:13:20Z");
  auto back = parse_tuning_export(nlohmann::json::parse(doc.dump()));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ(as_json((*back)[0]), as_json(a));  // "1024x4096" < "8x128"
  EXPECT_EQ(as_json((*back)[1]), as_json(b));
}

TEST(Tuning, ABadExportIsRejectedNamingTheEntry) {
  EXPECT_FALSE(parse_tuning_export(nlohmann::json::object()).ok());
  nlohmann::json doc = tuning_export({sample_tuned()}, 0);
  doc["entries"][0]["dtype"] = "fp8";
  auto r = parse_tuning_export(doc);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("entry 0"), std::string::npos) << r.status().message();
  doc = tuning_export({sample_tuned()}, 0);
  doc["entries"][0]["latency_us"] = 0;
  EXPECT_FALSE(parse_tuning_export(doc).ok());
  doc = tuning_export({sample_tuned()}, 0);
  doc["entries"][0]["shape"] = {4, 0};
  EXPECT_FALSE(parse_tuning_export(doc).ok());
}

TEST(Tuning, AQueryMatchesOnEveryFieldItSets) {
  const TunedEntry e = sample_tuned();
  EXPECT_TRUE(TuningQuery{}.matches(e));
  EXPECT_TRUE((TuningQuery{"softmax", "cuda", "nvidia H200", "bf16", "1024x4096"}.matches(e)));
  EXPECT_FALSE((TuningQuery{"rmsnorm", "", "", "", ""}.matches(e)));
  EXPECT_FALSE((TuningQuery{"", "triton", "", "", ""}.matches(e)));
  EXPECT_FALSE((TuningQuery{"", "", "NVIDIA A100", "", ""}.matches(e)));
  EXPECT_FALSE((TuningQuery{"", "", "", "fp16", ""}.matches(e)));
  EXPECT_FALSE((TuningQuery{"", "", "", "", "8x128"}.matches(e)));
}

}  // namespace
}  // namespace ak
