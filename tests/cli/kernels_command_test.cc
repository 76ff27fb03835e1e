// autokernel kernels / starter / check (cli/kernels_command.cc), offline: every type listed, a
// starter for every type and backend, and broken campaigns refused by the coordinator's planner
// with the key at fault and the valid values.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "cli/commands.h"
#include "kernels/registry.h"

namespace ak::cli {
namespace {

namespace fs = std::filesystem;

TEST(KernelsCommand, ListsEveryTypeAndOneTypesTunablesAndRefusesATypoNamingTheTypes) {
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(kernels_list(""), 0);
  const std::string all = ::testing::internal::GetCapturedStdout();
  for (const kernels::KernelSpec* k : kernels::all()) EXPECT_NE(all.find(k->name + " "), std::string::npos) << k->name;
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(kernels_list("matmul"), 0);
  const std::string one = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(one.find("tunable AK_BM"), std::string::npos) << one;
  EXPECT_NE(one.find("backend cuda: entry ak_matmul"), std::string::npos) << one;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(kernels_list("rmsnrom"), 2);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("the kernel types are softmax"), std::string::npos);
}

TEST(KernelsCommand, PrintsASelfContainedStarterForEveryTypeAndBackend) {
  for (const kernels::KernelSpec* k : kernels::all())
    for (const auto& [b, src] : k->backends) {
      ::testing::internal::CaptureStdout();
      EXPECT_EQ(starter(k->name, backend_name(b)), 0);
      const std::string text = ::testing::internal::GetCapturedStdout();
      EXPECT_EQ(text, src.source) << k->name << " " << backend_name(b);
      EXPECT_EQ(text.find("#include \"../"), std::string::npos) << k->name << ": an include that is not inlined";
    }
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(starter("flash_attention", "cpu"), 2);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("has no backend 'cpu'; it has cuda"), std::string::npos);
}

TEST(KernelsCommand, CheckSaysWhatAGoodCampaignPlansAndNamesTheKeyAndTheValidValuesOfABadOne) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("check_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::vector<std::pair<std::string, std::string>> files = {
      {"good.json",
       R"({"name": "ok", "backend": "cpu", "kernel_type": "softmax", "shapes": [[8, 64]], "dtypes": ["fp32"],
            "configs": "default"})"},
      {"typo_type.json", R"({"backend": "cpu", "kernel_type": "rmsnrom", "shapes": [[8, 64]]})"},
      {"typo_key.json", R"({"backend": "cpu", "kernel_type": "softmax", "shapse": [[8, 64]]})"},
      {"bad_kind.json", R"({"kind": "model", "model": "examples/gpt2", "task": "tune"})"},
  };
  std::vector<std::string> paths;
  for (const auto& [name, text] : files) {
    std::ofstream((dir / name).string()) << text;
    paths.push_back((dir / name).string());
  }
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(check({paths[0]}, false), 0);
  std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("ok, kernels campaign 'ok': 1 jobs"), std::string::npos) << out;
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(check(paths, false), 2);
  out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("unknown kernel_type 'rmsnrom'; the kernel types are softmax"), std::string::npos) << out;
  EXPECT_NE(out.find("unknown campaign key 'shapse'; the keys are"), std::string::npos) << out;
  EXPECT_NE(out.find("'task' must be \"profile\" or \"verify\""), std::string::npos) << out;
  fs::remove_all(dir);
}

// The docs a user reads first name every kernel type the registry has, as code ("`softmax`").
TEST(KernelsCommand, TheCampaignGuideAndTheLibraryReadmeNameEveryKernelType) {
  for (const char* doc : {"coordinator/CAMPAIGNS.md", "kernels/README.md"}) {
    std::ifstream in(std::string(AK_SOURCE_DIR) + "/" + doc);
    ASSERT_TRUE(in) << doc;
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (const kernels::KernelSpec* k : kernels::all())
      EXPECT_NE(text.find("`" + k->name + "`"), std::string::npos) << doc << " does not name " << k->name;
  }
}

}  // namespace
}  // namespace ak::cli
