#include "coordinator/campaign.h"

#include <set>

#include <gtest/gtest.h>

namespace ak {
namespace {

using nlohmann::json;

TEST(CampaignTest, DefaultCpuCampaignTriesEveryConfigurationAtEveryDefaultShapeAndDtype) {
  auto p = plan_campaign(default_campaign(Backend::kCpu), "c1", 0);
  ASSERT_TRUE(p.ok()) << p.status().message();
  // 3 shapes x 3 dtypes x (4 x 2 x 3) configurations.
  EXPECT_EQ(p->jobs.size(), 216u);
  std::set<std::string> ids;
  for (const auto& j : p->jobs) {
    ids.insert(j.job_id);
    EXPECT_EQ(j.requires_.backend, Backend::kCpu);
    EXPECT_FALSE(j.source.empty());
    EXPECT_EQ(j.campaign_id, "c1");
  }
  EXPECT_EQ(ids.size(), p->jobs.size());
  EXPECT_EQ(p->record.job_count, 216);
}

TEST(CampaignTest, RepeatAndExplicitConfigsMultiplyJobs) {
  json doc = {{"kernel_type", "softmax"}, {"backend", "cpu"}, {"shapes", {{4, 8}}}, {"dtypes", {"fp32"}},
              {"configs", {{{"AK_VEC", 4}}, {{"AK_VEC", 8}}}}, {"repeat", 3}};
  auto p = plan_campaign(doc, "c2", 0);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->jobs.size(), 6u);
  EXPECT_EQ(p->jobs[0].config.at("AK_VEC"), 4);
  EXPECT_EQ(p->jobs[1].config.at("AK_VEC"), 8);
}

TEST(CampaignTest, DefaultConfigsTakeEachDtypesOwnDefaults) {
  // matmul's fp32 path declares AK_WARPS_N=4; fp16 and bf16 keep the space's 2. An explicit
  // config starts from the same per-dtype defaults and keeps what it sets.
  json doc = {{"kernel_type", "matmul"}, {"backend", "cuda"}, {"shapes", {{64, 64, 64}}}, {"configs", "default"}};
  auto p = plan_campaign(doc, "c5", 0);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->jobs.size(), 3u);
  for (const auto& j : p->jobs) EXPECT_EQ(j.config.at("AK_WARPS_N"), j.dtype == DType::kF32 ? 4 : 2) << dtype_name(j.dtype);
  doc["configs"] = {{{"AK_STAGES", 3}}};
  p = plan_campaign(doc, "c6", 0);
  ASSERT_TRUE(p.ok()) << p.status().message();
  for (const auto& j : p->jobs) {
    EXPECT_EQ(j.config.at("AK_STAGES"), 3);
    EXPECT_EQ(j.config.at("AK_WARPS_N"), j.dtype == DType::kF32 ? 4 : 2);
  }
}

TEST(CampaignTest, RequirementsAreCopiedToEveryJob) {
  json doc = {{"kernel_type", "softmax"}, {"backend", "cuda"}, {"configs", "default"},
              {"requires", {{"gpu_model", "NVIDIA H200"}, {"arch", "sm_90a"}}}};
  auto p = plan_campaign(doc, "c3", 0);
  ASSERT_TRUE(p.ok()) << p.status().message();
  for (const auto& j : p->jobs) {
    EXPECT_EQ(j.requires_.gpu_model, "NVIDIA H200");
    EXPECT_EQ(j.requires_.arch, "sm_90a");
    EXPECT_EQ(j.requires_.backend, Backend::kCuda);
  }
}

struct BadCase {
  json doc;
  std::string needle;
};

TEST(CampaignTest, BadCampaignsAreRefusedWithAReasonThatNamesTheProblem) {
  const json base = {{"kernel_type", "softmax"}, {"backend", "cpu"}};
  auto with = [&](const std::string& k, json v) {
    json d = base;
    d[k] = std::move(v);
    return d;
  };
  std::vector<BadCase> cases = {
      {json::array(), "object"},
      {with("shapez", 1), "shapez"},
      {with("kernel_type", "fft"), "fft"},
      {with("backend", "tpu"), "tpu"},
      {with("shapes", {{0, 4}}), "rows >= 1"},
      {with("dtypes", {"fp8"}), "fp8"},
      {with("dtypes", json::array()), "empty"},
      {with("configs", {{{"AK_NOPE", 1}}}), "AK_NOPE"},
      {with("configs", {{{"AK_VEC", 3}}}), "search space"},
      {with("repeat", 0), "repeat"},
      {with("requires", {{"gpu", "x"}}), "gpu"},
      {with("measure", {{"samples", 3}}), "samples"},
      {with("timeout_ms", -1), "timeout_ms"},
  };
  for (const auto& c : cases) {
    auto p = plan_campaign(c.doc, "cx", 0);
    ASSERT_FALSE(p.ok()) << c.doc.dump();
    EXPECT_NE(p.status().message().find(c.needle), std::string::npos) << p.status().message();
  }
}

}  // namespace
}  // namespace ak
