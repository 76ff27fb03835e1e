#include "kernels/tuned.h"

#include <algorithm>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "kernels/registry.h"

namespace ak::kernels {
namespace {

using nlohmann::json;

json database() {
  return {{"format", 1},
          {"entries",
           {{{"kernel_type", "softmax"}, {"gpu_model", "NVIDIA H200"}, {"dtype", "bf16"}, {"shape", {4096, 4096}},
             {"config", {{"AK_THREADS", 128}, {"AK_VEC", 4}}}, {"latency_us", 34.4}},
            {{"kernel_type", "softmax"}, {"gpu_model", "NVIDIA H200"}, {"dtype", "bf16"}, {"shape", {8192, 32000}},
             {"config", {{"AK_THREADS", 1024}, {"AK_VEC", 4}}}, {"provenance", {{"job_id", "c1-000214"}}}},
            {{"kernel_type", "softmax"}, {"gpu_model", "NVIDIA H100 80GB HBM3"}, {"dtype", "bf16"},
             {"shape", {4096, 4096}}, {"config", {{"AK_THREADS", 256}}}}}}};
}

TEST(TunedConfigs, ExactShapeGivesItsConfigurationForThatGpuAndDtype) {
  auto t = TunedConfigs::parse(database());
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->size(), 3u);
  auto m = t->find("softmax", "nvidia h200", "bf16", {8192, 32000});
  ASSERT_TRUE(m.has_value());
  EXPECT_TRUE(m->exact);
  EXPECT_EQ(m->config.at("AK_THREADS"), 1024);
  auto h100 = t->find("softmax", "NVIDIA H100 80GB HBM3", "bf16", {4096, 4096});
  ASSERT_TRUE(h100.has_value());
  EXPECT_EQ(h100->config.at("AK_THREADS"), 256);
}

TEST(TunedConfigs, UntunedShapeTakesTheNearestInLogSpaceAndOtherKeysMissOut) {
  auto t = TunedConfigs::parse(database());
  ASSERT_TRUE(t.ok());
  // 6000x30000 is nearer 8192x32000 than 4096x4096 in log2 distance
  auto m = t->find("softmax", "NVIDIA H200", "bf16", {6000, 30000});
  ASSERT_TRUE(m.has_value());
  EXPECT_FALSE(m->exact);
  EXPECT_EQ(m->shape, (std::vector<int64_t>{8192, 32000}));
  auto small = t->find("softmax", "NVIDIA H200", "bf16", {2048, 2048});
  ASSERT_TRUE(small.has_value());
  EXPECT_EQ(small->config.at("AK_THREADS"), 128);
  EXPECT_FALSE(t->find("softmax", "NVIDIA H200", "fp16", {4096, 4096}).has_value()) << "other dtype: default";
  EXPECT_FALSE(t->find("softmax", "NVIDIA A100", "bf16", {4096, 4096}).has_value()) << "other GPU: default";
  EXPECT_FALSE(t->find("softmax", "NVIDIA H200", "bf16", {4096, 4096, 2}).has_value()) << "other rank";
  EXPECT_FALSE(t->find("reduce", "NVIDIA H200", "bf16", {4096, 4096}).has_value());
}

TEST(TunedConfigs, LoadsAFileAndRefusesMalformedOnesWithTheReason) {
  const std::string path = (std::filesystem::temp_directory_path() / "ak-tuned-test.json").string();
  {
    std::ofstream(path) << database().dump(1);
  }
  auto t = TunedConfigs::load(path);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->size(), 3u);
  {
    std::ofstream(path) << "{not json";
  }
  EXPECT_NE(TunedConfigs::load(path).status().message().find("is not JSON"), std::string::npos);
  std::remove(path.c_str());
  EXPECT_FALSE(TunedConfigs::load(path).ok());
  EXPECT_FALSE(TunedConfigs::parse(json{{"format", 2}, {"entries", json::array()}}).ok());
  json bad = database();
  bad["entries"][1].erase("config");
  auto b = TunedConfigs::parse(bad);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("entry 1"), std::string::npos) << b.status().message();
}

// The farm's own export of its H200 study campaign (bench/results/tuning-h200-2026-12-04.json,
// written by `autokernel run --campaign examples/campaigns/study_h200.toml` on one H200): every
// entry's configuration is a point of its type's declared cuda space, and the lookup returns the
// tuned configurations for the tuned shapes and the nearest ones for others.
TEST(TunedConfigs, TheH200StudyCampaignsExportLoadsAndAnswersPerShape) {
  auto t = TunedConfigs::load(std::string(AK_SOURCE_DIR) + "/bench/results/tuning-h200-2026-12-04.json");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->size(), 20u) << "nine types (flash_attention causal and not) at two shapes";
  auto sm = t->find("softmax", "NVIDIA H200", "bf16", {4096, 4096}, "cuda");
  ASSERT_TRUE(sm.has_value());
  EXPECT_TRUE(sm->exact);
  EXPECT_EQ(sm->config, (std::map<std::string, int64_t>{{"AK_THREADS", 256}, {"AK_VEC", 4}, {"AK_WARP_PER_ROW", 0}}));
  auto ce = t->find("cross_entropy", "nvidia h200", "bf16", {8192, 128256}, "cuda");
  ASSERT_TRUE(ce.has_value());
  EXPECT_FALSE(ce->exact);
  EXPECT_EQ(ce->shape, (std::vector<int64_t>{4096, 128256}));
  EXPECT_FALSE(t->find("softmax", "NVIDIA H200", "bf16", {4096, 4096}, "triton").has_value())
      << "the campaign tuned the cuda starters only";
  const json doc = json::parse(std::ifstream(std::string(AK_SOURCE_DIR) + "/bench/results/tuning-h200-2026-12-04.json"));
  for (const auto& e : doc["entries"]) {
    const KernelSpec* spec = find(e["kernel_type"].get<std::string>());
    ASSERT_NE(spec, nullptr) << e["kernel_type"];
    const auto& space = spec->backends.at(Backend::kCuda).space;
    for (const auto& [name, value] : e["config"].items()) {
      auto it = std::find_if(space.begin(), space.end(), [&](const Tunable& x) { return x.name == name; });
      ASSERT_NE(it, space.end()) << name;
      EXPECT_NE(std::find(it->values.begin(), it->values.end(), value.get<int64_t>()), it->values.end()) << name;
    }
    if (spec->cuda_config_error) {
      EXPECT_EQ(spec->cuda_config_error(e["config"].get<std::map<std::string, int64_t>>(), DType::kBF16), "");
    }
  }
}

}  // namespace
}  // namespace ak::kernels
