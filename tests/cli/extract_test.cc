#include "cli/extract.h"

#include <gtest/gtest.h>

#include "coordinator/study.h"
#include "kernels/registry.h"

namespace ak::cli {
namespace {

using nlohmann::json;

protocol::ModelProfile profile() {
  const json doc = {{"model", "examples/llama:1b"},
                    {"device", "cuda"},
                    {"gpu", "NVIDIA H200"},
                    {"dtype", "bf16"},
                    {"mode", "eager"},
                    {"total_us_per_iter", 1000.0},
                    {"unattributed_us_per_iter", 0.0},
                    {"ops", json::array()},
                    {"targets",
                     {{{"kernel_type", "matmul"},
                       {"shape", {2048, 2048, 2048}},
                       {"dtype", "bf16"},
                       {"layout", json::object()},
                       {"ops", {"aten::linear"}},
                       {"us_per_iter", 300.0},
                       {"share", 0.3},
                       {"bound", "compute"}},
                      {{"kernel_type", "flash_attention_causal"},
                       {"shape", {1, 32, 2048, 64}},
                       {"dtype", "bf16"},
                       {"layout", {{"kv_heads", 4}}},
                       {"ops", {"aten::scaled_dot_product_attention"}},
                       {"us_per_iter", 200.0},
                       {"share", 0.2},
                       {"bound", "compute"}},
                      {{"kernel_type", "matmul"},
                       {"shape", {8, 4, 16}},
                       {"dtype", "bf16"},
                       {"layout", {{"batch", 3}}},
                       {"ops", {"aten::bmm"}},
                       {"us_per_iter", 100.0},
                       {"share", 0.1},
                       {"bound", "memory"}},
                      {{"kernel_type", "rmsnorm"},
                       {"shape", {2048, 2048}},
                       {"dtype", "bf16"},
                       {"layout", json::object()},
                       {"ops", {"aten::rms_norm"}},
                       {"us_per_iter", 150.0},
                       {"share", 0.15},
                       {"bound", "memory"}},
                      {{"kernel_type", "softmax"},
                       {"shape", {64, 64}},
                       {"dtype", "bf16"},
                       {"layout", json::object()},
                       {"ops", {"aten::softmax"}},
                       {"us_per_iter", 1.0},
                       {"share", 0.001},
                       {"bound", "memory"}}}},
                    {"uncovered", json::array()}};
  auto p = protocol::parse_model_profile(doc);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return *p;
}

TEST(Extract, KeepsTheTargetsAKernelTypeTakesWithTheirSharesAndSaysWhyOthersAreLeftOut) {
  const Extraction x = extract(profile(), ExtractOptions{});
  ASSERT_EQ(x.targets.size(), 5u);
  EXPECT_EQ(x.targets[0].target.share, 0.3);  // largest first
  std::map<std::string, std::string> why;
  for (const auto& t : x.targets) why[t.target.kernel_type + (t.target.layout.empty() ? "" : "+")] = t.why;
  EXPECT_EQ(why["matmul"], "");
  EXPECT_EQ(why["rmsnorm"], "");
  EXPECT_NE(why["flash_attention_causal+"].find("grouped-query attention (4 KV heads)"), std::string::npos);
  EXPECT_NE(why["matmul+"].find("batched matmul"), std::string::npos);
  EXPECT_NE(why["softmax"].find("below --min-share"), std::string::npos);
  EXPECT_DOUBLE_EQ(x.kept_share, 0.45);

  // The campaign is a study campaign the coordinator accepts, on the profile's GPU, with the
  // model's shapes and shares.
  ASSERT_TRUE(x.campaign.is_object());
  EXPECT_EQ(x.campaign["gpu_models"], json({"NVIDIA H200"}));
  auto study = parse_study_campaign(x.campaign);
  ASSERT_TRUE(study.ok()) << study.status().message() << "\n" << x.campaign.dump(1);
  ASSERT_EQ(study->studies.size(), 2u);
  EXPECT_EQ(study->studies[0].kernel_type, "matmul");
  EXPECT_EQ(study->studies[0].shape, (std::vector<int64_t>{2048, 2048, 2048}));
  EXPECT_DOUBLE_EQ(study->studies[0].share, 0.3);
  EXPECT_EQ(study->studies[1].gpu_model, "NVIDIA H200");
}

TEST(Extract, ANormWithAnotherEpsOrWithoutItsWeightIsLeftOutNamingIt) {
  protocol::ModelProfile p = profile();
  p.targets[3].layout = {{"eps", 1e-7}};  // the rmsnorm target, at an eps no rmsnorm type computes with
  protocol::ModelTargetRow ln = p.targets[3];
  ln.kernel_type = "layernorm";
  ln.layout = {{"weight", false}, {"bias", false}};
  p.targets.push_back(ln);
  std::map<std::string, std::string> why;
  for (const auto& t : extract(p, ExtractOptions{}).targets) why[t.target.kernel_type] = t.why;
  EXPECT_EQ(why["rmsnorm"],
            "eps 1e-07: no rmsnorm kernel type computes with it (rmsnorm, rmsnorm_e5: kernels/rmsnorm/spec.cc); "
            "another eps is not a kernel type yet");
  EXPECT_EQ(why["layernorm"], "a layernorm without a weight is not a kernel type yet");
}

// Each kept cuda target starts from its type's known good variants that its dtype can build
// (kernels/registry.h, BackendSource::starts): matmul in bf16 from the TMA ones; in fp32, which
// runs the SIMT path, from none of them. The coordinator takes the starts.
TEST(Extract, ACudaTargetStartsFromItsTypesKnownGoodVariantsThatItsDtypeCanBuild) {
  protocol::ModelProfile p = profile();
  const Extraction x = extract(p, ExtractOptions{});
  const json& matmul = x.campaign["targets"][0];
  ASSERT_EQ(matmul["kernel_type"], "matmul");
  const auto& known = kernels::find("matmul")->backends.at(Backend::kCuda).starts;
  ASSERT_FALSE(known.empty());
  ASSERT_TRUE(matmul.contains("start")) << matmul.dump();
  EXPECT_EQ(matmul["start"], json(known));
  auto study = parse_study_campaign(x.campaign);
  ASSERT_TRUE(study.ok()) << study.status().message();
  EXPECT_EQ(study->studies[0].start.size(), known.size()) << "each start kept, completed";
  EXPECT_EQ(study->studies[0].start[0].at("AK_WGMMA"), 2);

  p.targets[0].dtype = "fp32";
  const json fp32 = extract(p, ExtractOptions{}).campaign["targets"][0];
  EXPECT_FALSE(fp32.contains("start")) << fp32.dump();
  ExtractOptions cpu;
  cpu.backend = "cpu";
  const json on_cpu = extract(profile(), cpu).campaign["targets"][0];
  EXPECT_FALSE(on_cpu.contains("start")) << "the cpu backend has its own space";
}

TEST(Extract, NothingKeptMeansNoCampaign) {
  ExtractOptions o;
  o.min_share = 0.9;
  const Extraction x = extract(profile(), o);
  EXPECT_TRUE(x.campaign.is_null());
  EXPECT_EQ(x.kept_share, 0);
}

}  // namespace
}  // namespace ak::cli
