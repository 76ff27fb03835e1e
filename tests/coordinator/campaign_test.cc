#include "coordinator/campaign.h"
#include "kernels/registry.h"

#include <set>

#include <gtest/gtest.h>

namespace ak {
namespace {

using nlohmann::json;

// On cuda the default campaign stays the 288-job workload of the throughput figures (the two-pass
// path's 24 configurations) while the search space grows; examples/campaigns/softmax_h200.toml
// lists the same 24.
TEST(CampaignTest, DefaultCudaCampaignIsTheTwoPassPathsTwentyFourConfigurations) {
  auto p = plan_campaign(default_campaign(Backend::kCuda), "c1", 0);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->jobs.size(), 288u);
  std::set<std::string> configs;
  for (const auto& j : p->jobs) {
    EXPECT_EQ(j.config.count("AK_CACHE") ? j.config.at("AK_CACHE") : 0, 0);
    EXPECT_LE(j.config.at("AK_VEC"), 4);
    configs.insert(json(j.config).dump());
  }
  EXPECT_EQ(configs.size(), 24u);
  const auto all = kernels::enumerate_space(kernels::find("softmax")->backends.at(Backend::kCuda).space);
  EXPECT_GT(all.size(), 24u) << "the space itself holds the register cache and 16-byte packs";
}

TEST(CampaignTest, DefaultCpuCampaignTriesEveryConfigurationAtEveryDefaultShapeAndDtype) {
  auto p = plan_campaign(default_campaign(Backend::kCpu), "c1", 0);
  ASSERT_TRUE(p.ok()) << p.status().message();
  // 3 shapes x 3 dtypes x (4 x 2 x 3) configurations.
  EXPECT_EQ(p->jobs.size(), 216u);
  std::set<std::string> ids;
  for (const auto& j : p->jobs) {
    ids.insert(j.job_id);
    EXPECT_EQ(j.requires_.backend, Backend::kCpu);
    // The starter source is kept once for all jobs, named by its hash.
    EXPECT_TRUE(j.source.empty());
    ASSERT_EQ(p->sources.count(j.source_hash), 1u);
    EXPECT_FALSE(p->sources.at(j.source_hash).empty());
    EXPECT_EQ(j.campaign_id, "c1");
  }
  EXPECT_EQ(p->sources.size(), 1u);
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

// A dtype's own defaults fill an explicit configuration only where the starter can build what they
// make: flash_attention's fp16/bf16 AK_WGMMA=1 needs 16 query rows a warp, so {AK_WARPS = 4} (32
// rows a warp at the default tile) keeps the mma.sync path it ran before that default, while
// {AK_BLOCK_N = 128} and the default configuration take the warpgroup MMA path.
TEST(CampaignTest, ADtypesDefaultsFillAnExplicitConfigurationOnlyWhereTheStarterCanBuildIt) {
  json doc = {{"kernel_type", "flash_attention"},
              {"backend", "cuda"},
              {"shapes", {{2, 32, 2048, 128}}},
              {"dtypes", {"bf16", "fp16"}},
              {"configs", {{{"AK_WARPS", 4}}, {{"AK_BLOCK_N", 128}}}}};
  auto p = plan_campaign(doc, "c7", 0);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->jobs.size(), 4u);
  const kernels::KernelSpec* spec = kernels::find("flash_attention");
  for (const auto& j : p->jobs) {
    const bool warps4 = j.config.at("AK_WARPS") == 4;
    EXPECT_EQ(j.config.at("AK_WGMMA"), warps4 ? 0 : 1) << config_string(j.config);
    EXPECT_EQ(spec->cuda_config_error(j.config, j.dtype), "") << config_string(j.config);
  }
  doc["configs"] = "default";
  doc["dtypes"] = {"bf16", "fp32"};
  p = plan_campaign(doc, "c8", 0);
  ASSERT_TRUE(p.ok()) << p.status().message();
  for (const auto& j : p->jobs) EXPECT_EQ(j.config.at("AK_WGMMA"), j.dtype == DType::kBF16 ? 1 : 0);
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
      // Accepted before though wrong (issue 19): each names the field and its valid range.
      {with("configs", json::array()), "'configs' is an empty list"},
      {with("configs", {1, 2}), "each entry of 'configs' must be an object"},
      {with("configs", {{{"AK_VEC", 1e30}}}), "'configs: AK_VEC' must be an integer"},
      {with("timeout_ms", INT64_MAX),
       "'timeout_ms' must be an integer within 1000..3600000, got number 9223372036854775807"},
      {with("timeout_ms", 500), "'timeout_ms' must be an integer within 1000..3600000"},
      {with("timeout_ms", 1.5e4 + 0.5), "'timeout_ms' must be an integer"},
      {with("timeout_ms", "60000"), "got string"},
      {with("measure", {{"warmup", -1}}), "'measure.warmup' must be an integer within 0..10000"},
      {with("measure", {{"min_samples", 0}}), "'measure.min_samples' must be an integer within 1..100000"},
      {with("measure", {{"max_samples", 1e9}}), "'measure.max_samples' must be an integer within 10..100000"},
      {with("measure", {{"min_samples", 500}}), "'measure.max_samples' (default 200) must be at least"},
      {with("measure", {{"max_time_ms", -5}}), "'measure.max_time_ms' must be an integer within 1..3600000"},
      {with("measure", {{"noise_target", -0.1}}), "'measure.noise_target' must be a number within 0..1"},
      {with("measure", {{"noise_target", 1e30}}), "'measure.noise_target'"},
      {with("measure", {{"cold", "yes"}}), "'measure.cold' must be true or false"},
      {with("shapes", {{1e30, 4}}), "'shapes' must be an integer within 0..1099511627776, got number 1e+30"},
      {with("shapes", {{-3, 4}}), "'shapes' must be an integer"},
      {with("shapes", {{64.5, 4}}), "'shapes' must be an integer"},
      {with("shapes", {json::array()}), "each shape must be a list of 1 to 8 integers"},
      {with("shapes", {{1'000'000, 1'000'000}}),
       "moves 8e+03 GB per call; this coordinator plans at most 68.7 GB per job"},
      {with("repeat", 1e30), "'repeat' must be an integer within 1..100000"},
  };
  for (const auto& c : cases) {
    auto p = plan_campaign(c.doc, "cx", 0);
    ASSERT_FALSE(p.ok()) << c.doc.dump();
    EXPECT_NE(p.status().message().find(c.needle), std::string::npos) << p.status().message();
  }
}

TEST(CampaignTest, IntegralFloatsWithinRangeAreTheirIntegers) {
  // TOML writes 4096.0 for a float; it is the integer, not a refusal.
  json doc = {{"kernel_type", "softmax"}, {"backend", "cpu"},     {"shapes", {{8.0, 64.0}}},
              {"timeout_ms", 20000.0},    {"configs", "default"}, {"dtypes", {"fp32"}}};
  auto p = plan_campaign(doc, "cf", 0);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->jobs.at(0).shape, (std::vector<int64_t>{8, 64}));
  EXPECT_EQ(p->jobs.at(0).timeout_ms, 20000);
}

TEST(CampaignTest, ACampaignOverTheJobCapIsRefusedNamingTheCountAndTheCap) {
  json doc = {{"kernel_type", "softmax"}, {"backend", "cpu"}, {"shapes", {{8, 64}, {16, 64}}},
              {"dtypes", {"fp32"}},       {"configs", "all"}, {"repeat", 3}};
  PlanLimits limits;
  limits.max_jobs = 100;
  auto p = plan_campaign(doc, "cj", 0, limits);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("campaign plans 3 x 48 = 144 jobs"), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find("at most 100 per campaign"), std::string::npos) << p.status().message();
  limits.max_jobs = 144;
  EXPECT_TRUE(plan_campaign(doc, "cj", 0, limits).ok());
  // A repeat far over the cap is refused by the count alone, before any job is built.
  doc["repeat"] = 100'000;
  doc["shapes"] = json::array();
  for (int i = 1; i <= 100; ++i) doc["shapes"].push_back({i, 64});
  p = plan_campaign(doc, "cj", 0);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("= 240000000 jobs"), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find("at most 20000"), std::string::npos) << p.status().message();
}

TEST(CampaignTest, AShapeLargerThanTheConnectedWorkersMemoryIsRefusedAtPlanning) {
  json doc = {{"kernel_type", "softmax"},
              {"backend", "cpu"},
              {"shapes", {{65536, 65536}}},
              {"dtypes", {"fp32"}},
              {"configs", "default"}};
  EXPECT_TRUE(plan_campaign(doc, "cm", 0).ok());  // nothing known about the workers: only the cap
  PlanLimits limits;
  limits.device_memory_bytes[Backend::kCpu] = int64_t{8} << 30;
  auto p = plan_campaign(doc, "cm", 0, limits);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("shape 65536x65536 of softmax fp32 needs 34.4 GB of device memory; the largest "
                                      "connected cpu worker has 8.59 GB"),
            std::string::npos)
      << p.status().message();
  limits.device_memory_bytes[Backend::kCpu] = int64_t{64} << 30;
  EXPECT_TRUE(plan_campaign(doc, "cm", 0, limits).ok());
  limits.device_memory_bytes.clear();
  limits.device_memory_bytes[Backend::kCuda] = 1;  // another backend's workers do not count
  EXPECT_TRUE(plan_campaign(doc, "cm", 0, limits).ok());
}

}  // namespace
}  // namespace ak
