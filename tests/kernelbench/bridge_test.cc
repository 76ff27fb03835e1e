#include "kernelbench/bridge.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace ak::kernelbench {
namespace {

namespace fs = std::filesystem;

class BridgeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "ak-kb-bridge-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const fs::path& rel, const std::string& text) {
    fs::create_directories((dir_ / rel).parent_path());
    std::ofstream(dir_ / rel) << text;
  }
  fs::path dir_;
};

TEST_F(BridgeTest, ProblemsOfACheckoutLoadSortedWithTheirNamesAndHashes) {
  write("KernelBench/level1/10_ReLU.py", "relu");
  write("KernelBench/level1/2_Matmul.py", "matmul");
  write("KernelBench/level2/1_Conv_ReLU.py", "conv");
  write("KernelBench/level1/README.md", "not a problem");
  write("KernelBench/level1/helper.py", "no id");
  auto all = load_problems(dir_.string(), {});
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].name, "2_Matmul.py");
  EXPECT_EQ((*all)[0].problem_id, 2);
  EXPECT_EQ((*all)[1].name, "10_ReLU.py");
  EXPECT_EQ((*all)[2].level, 2);
  EXPECT_EQ((*all)[0].code, "matmul");
  EXPECT_EQ((*all)[0].code_hash, xxh64_hex("matmul"));
  EXPECT_NE((*all)[0].code_hash, (*all)[1].code_hash);
  // The KernelBench/ folder itself works as the root too.
  auto inner = load_problems((dir_ / "KernelBench").string(), {});
  ASSERT_TRUE(inner.ok());
  EXPECT_EQ(inner->size(), 3u);
}

TEST_F(BridgeTest, ASelectionTakesLevelsAndIdRanges) {
  for (int i = 1; i <= 12; ++i) write("level1/" + std::to_string(i) + "_P.py", "x");
  write("level3/4_Model.py", "y");
  auto ids = parse_id_ranges("2-4, 9,11-11");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::set<int>{2, 3, 4, 9, 11}));
  auto sel = load_problems(dir_.string(), Selection{{1}, *ids});
  ASSERT_TRUE(sel.ok());
  ASSERT_EQ(sel->size(), 5u);
  EXPECT_EQ(sel->back().problem_id, 11);
  auto l3 = load_problems(dir_.string(), Selection{{3}, {}});
  ASSERT_TRUE(l3.ok());
  ASSERT_EQ(l3->size(), 1u);
  EXPECT_EQ(l3->front().name, "4_Model.py");
  EXPECT_FALSE(parse_id_ranges("3-1").ok());
  EXPECT_FALSE(parse_id_ranges("a").ok());
  EXPECT_NE(parse_id_ranges("1,x-2").status().message().find("x-2"), std::string::npos);
}

TEST_F(BridgeTest, AFolderWithoutLevelsIsNotFoundAndDuplicatesAreErrors) {
  auto none = load_problems(dir_.string(), {});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("level1/"), std::string::npos);
  write("level1/3_A.py", "a");
  write("level1/3_B.py", "b");
  auto dup = load_problems(dir_.string(), {});
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("3_A.py"), std::string::npos);
}

TEST_F(BridgeTest, GenerationsAreFoundByKernelBenchsNamingAnywhereBelowTheFolder) {
  EXPECT_FALSE(parse_generation_name("level_1_problem_2_kernel.py").has_value());
  auto g = parse_generation_name("level_2_problem_17_sample_3_kernel.py");
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->level, 2);
  EXPECT_EQ(g->problem_id, 17);
  EXPECT_EQ(g->sample_id, 3);
  write("runs/r1/level_1_problem_2_sample_1_kernel.py", "b");
  write("runs/r1/level_1_problem_2_sample_0_kernel.py", "a");
  write("runs/r1/level_1_problem_2_sample_0_prompt.txt", "prompt");
  write("runs/r1/level_3_problem_1_sample_0_kernel.py", "c");
  auto gens = load_generations((dir_ / "runs").string(), {});
  ASSERT_TRUE(gens.ok()) << gens.status().to_string();
  ASSERT_EQ(gens->size(), 3u);
  EXPECT_EQ((*gens)[0].sample_id, 0);
  EXPECT_EQ((*gens)[0].code, "a");
  EXPECT_EQ((*gens)[2].level, 3);
  auto l1 = load_generations((dir_ / "runs").string(), Selection{{1}, {}});
  ASSERT_TRUE(l1.ok());
  EXPECT_EQ(l1->size(), 2u);
  write("runs/r2/level_1_problem_2_sample_0_kernel.py", "again");
  EXPECT_FALSE(load_generations((dir_ / "runs").string(), {}).ok());
  EXPECT_EQ(load_generations((dir_ / "none").string(), {}).status().code(), StatusCode::kNotFound);
}

TEST_F(BridgeTest, TheProjectsOwnTestProblemsLoadAsACheckout) {
  auto p = load_problems(std::string(AK_SOURCE_DIR) + "/tests/kernelbench/problems", {});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_GE(p->size(), 12u);
  const nlohmann::json m = manifest(p->front(), {{"inputs", {{{"kind", "tensor"}}}}, {"junk", 1}});
  EXPECT_EQ(m["level"], p->front().level);
  EXPECT_EQ(m["name"], p->front().name);
  EXPECT_TRUE(m.contains("inputs"));
  EXPECT_FALSE(m.contains("junk"));
}

}  // namespace
}  // namespace ak::kernelbench
