#include "coordinator/model_campaign.h"

#include "common/tuning.h"

#include <gtest/gtest.h>

namespace ak {
namespace {

using nlohmann::json;

TEST(ModelCampaign, AnExampleIsPlannedAsOneProfileJobPerGpuModel) {
  const json doc = {{"kind", "model"},
                    {"model", "examples/llama:7b-4l"},
                    {"gpu_models", {"NVIDIA H200", "NVIDIA H100 80GB HBM3"}},
                    {"compile", true}};
  ASSERT_TRUE(is_model_document(doc));
  auto plan = plan_model_campaign(doc, "c7", 1000);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->jobs.size(), 2u);
  const JobSpec& j = plan->jobs[1];
  EXPECT_EQ(j.job_id, "c7-profile-g1");
  EXPECT_EQ(j.kernel_type, "model");
  EXPECT_EQ(j.requires_.backend, Backend::kCuda);
  EXPECT_EQ(j.requires_.gpu_model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(j.timeout_ms, 600'000);
  EXPECT_EQ(j.dtype, DType::kBF16);
  ASSERT_TRUE(j.model.has_value());
  EXPECT_EQ(j.model->model, "examples/llama:7b-4l");
  EXPECT_TRUE(j.model->compile);
  EXPECT_TRUE(j.source.empty());
  EXPECT_EQ(plan->record.job_count, 2);
  // The task survives the wire.
  const JobSpec back = json(j).get<JobSpec>();
  ASSERT_TRUE(back.model.has_value());
  EXPECT_EQ(json(*back.model), json(*j.model));
}

TEST(ModelCampaign, AUsersFileTravelsInTheDocumentUnderAPlainName) {
  auto plan = plan_model_campaign({{"kind", "model"},
                                   {"model", "my_net.py"},
                                   {"model_code", "def build_model(): ...\n"},
                                   {"backend", "cpu"},
                                   {"dtype", "fp32"}},
                                  "c1", 0);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->jobs.at(0).model->model_code, "def build_model(): ...\n");
  EXPECT_EQ(plan->jobs.at(0).requires_.backend, Backend::kCpu);
}

TEST(ModelCampaign, EveryBadFieldIsRefusedNamingIt) {
  const std::vector<std::pair<json, std::string>> bad = {
      {{{"kind", "model"}}, "needs 'model'"},
      {{{"kind", "model"}, {"model", "../etc/x.py"}, {"model_code", "x"}}, "'model' \"../etc/x.py\""},
      {{{"kind", "model"}, {"model", "dir/x.py"}, {"model_code", "x"}}, "no folders"},
      {{{"kind", "model"}, {"model", "x.py"}}, "its text goes in 'model_code'"},
      {{{"kind", "model"}, {"model", "examples/gpt2"}, {"model_code", "x"}}, "only for a model file"},
      {{{"kind", "model"}, {"model", "examples/gpt2"}, {"dtype", "fp8"}}, "'dtype' must be"},
      {{{"kind", "model"}, {"model", "examples/gpt2"}, {"iters", 0}}, "'iters' must be"},
      {{{"kind", "model"}, {"model", "examples/gpt2"}, {"task", "tune"}}, "'task' must be"},
      {{{"kind", "model"}, {"model", "examples/gpt2"}, {"task", "verify"}}, "needs 'tuned'"},
      {{{"kind", "model"}, {"model", "examples/gpt2"}, {"task", "verify"}, {"tuned", {{{"kernel_type", 1}}}}},
       "'tuned' entry 0 is not a tuning entry"},
      {{{"kind", "model"},
        {"model", "examples/gpt2"},
        {"task", "verify"},
        {"tuned", json::array()},
        {"min_speedup", -1}},
       "'min_speedup'"},
      {{{"kind", "model"}, {"model", "examples/gpt2"}, {"tuned", json::array()}}, "'tuned' is for a verify task"},
      {{{"kind", "model"}, {"model", "examples/gpt2"}, {"backend", "triton"}}, "'backend'"},
      {{{"kind", "model"}, {"model", "examples/gpt2"}, {"backend", "cpu"}, {"gpu_models", {"NVIDIA H200"}}},
       "a cpu campaign runs on cpu workers"},
      {{{"kind", "model"}, {"model", "examples/gpt2"}, {"modle", "x"}}, "unknown key 'modle'"},
      {{{"kind", "model"}, {"model", 7}}, "does not match its schema"},
      {{{"kind", "model"}, {"model", "examples/gpt2"}, {"timeout_ms", 1}}, "timeout_ms"},
  };
  for (const auto& [doc, why] : bad) {
    auto plan = plan_model_campaign(doc, "c", 0);
    ASSERT_FALSE(plan.ok()) << doc.dump();
    EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(plan.status().message().find(why), std::string::npos) << doc.dump() << ": " << plan.status().message();
  }
}

TEST(ModelCampaign, NamesTheDocumentAccepts) {
  for (const char* ok :
       {"examples/gpt2", "examples/llama:1b", "examples/llama:7b-4l", "hf:bert", "net.py", "my-net_2.py"})
    EXPECT_EQ(check_model_name(ok), "") << ok;
  for (const char* no :
       {"", "examples/", "examples/a/b", "examples/x:", "hf:", "hf:a b", "x.txt", "/abs.py", "a/b.py", "..py/"})
    EXPECT_NE(check_model_name(no), "") << no;
}

// A verify task takes the export document or its entries, defaults to timing torch.compile too, and
// its job carries the entries and the profile's targets.
TEST(ModelCampaign, AVerifyTaskCarriesTheTunedEntriesAndTargets) {
  TunedEntry e;
  e.kernel_type = "softmax";
  e.backend = Backend::kCuda;
  e.gpu_model = "NVIDIA H200";
  e.dtype = DType::kBF16;
  e.shape = {4096, 1024};
  e.config = {{"AK_THREADS", 256}};
  e.source = "src";
  const json targets = json::array({{{"kernel_type", "softmax"}, {"shape", {4096, 1024}}, {"share", 0.1}}});
  for (const json& tuned : {tuning_export({e}, 0), json::array({json(e)})}) {
    auto plan = plan_model_campaign(
        {{"kind", "model"}, {"task", "verify"}, {"model", "examples/gpt2"}, {"tuned", tuned}, {"targets", targets}},
        "c", 0);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    ASSERT_EQ(plan->jobs.size(), 1u);
    const JobSpec& j = plan->jobs[0];
    EXPECT_EQ(j.job_id, "c-verify");
    ASSERT_TRUE(j.model.has_value());
    EXPECT_EQ(j.model->action, "verify");
    EXPECT_TRUE(j.model->compile);
    EXPECT_EQ(j.model->iters, 20);
    ASSERT_EQ(j.model->tuned.size(), 1u);
    EXPECT_EQ(j.model->tuned[0].get<TunedEntry>().shape, e.shape);
    EXPECT_EQ(j.model->targets, targets);
    EXPECT_EQ(j.model->min_speedup, 1.0);
    // Through the wire and back.
    const JobSpec back = json(j).get<JobSpec>();
    EXPECT_EQ(back.model->tuned, j.model->tuned);
    EXPECT_EQ(back.model->decode_tokens, 32);
  }
}

}  // namespace
}  // namespace ak
