#include "kernelbench/bridge.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/process.h"

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
  EXPECT_EQ(p->front().level, 1);
  EXPECT_EQ(p->front().code_hash, xxh64_hex(p->front().code));
}

// The Hugging Face dataset's layout, as KernelBench's make_hf_dataset.py pushes it: one split per
// level (data/level_<N>-00000-of-00001.parquet), columns code, level, name (without ".py"),
// problem_id. Written here with pyarrow from the project's own problems.
class HfDatasetTest : public BridgeTest {
 protected:
  // Writes the split of `level` from the problem files of tests/kernelbench/problems/level<N>;
  // `level_in_rows` lets a test write rows that disagree with their split.
  void write_split(int level, int level_in_rows) {
    const std::string script = R"(
import os, sys, pyarrow as pa, pyarrow.parquet as pq
src, level, rows_level, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
files = sorted(f for f in os.listdir(src) if f.endswith(".py"))
rows = [{"code": open(os.path.join(src, f)).read(), "level": rows_level, "name": f[:-3],
         "problem_id": int(f.split("_")[0])} for f in files]
os.makedirs(os.path.dirname(out), exist_ok=True)
pq.write_table(pa.Table.from_pylist(rows), out)
)";
    const std::string src = std::string(AK_SOURCE_DIR) + "/tests/kernelbench/problems/level" + std::to_string(level);
    const std::string out = (dir_ / "data" / ("level_" + std::to_string(level) + "-00000-of-00001.parquet")).string();
    auto p = ChildProcess::spawn({AK_PYTHON, "-c", script, src, std::to_string(level), std::to_string(level_in_rows), out},
                                 {});
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    ASSERT_EQ(p->wait(), 0) << "writing " << out << " with " << AK_PYTHON << " (pyarrow)";
  }
};

TEST_F(HfDatasetTest, TheDatasetsFilesLoadAsTheSameProblemsAsTheCheckout) {
  write_split(1, 1);
  write_split(3, 3);
  EXPECT_TRUE(has_hf_dataset(dir_.string()));
  auto hf = load_problems(dir_.string(), {}, AK_PYTHON);
  ASSERT_TRUE(hf.ok()) << hf.status().to_string();
  auto checkout = load_problems(std::string(AK_SOURCE_DIR) + "/tests/kernelbench/problems", Selection{{1, 3}, {}});
  ASSERT_TRUE(checkout.ok());
  ASSERT_EQ(hf->size(), checkout->size());
  for (size_t i = 0; i < hf->size(); ++i) {
    const Problem &a = (*hf)[i], &b = (*checkout)[i];
    EXPECT_EQ(std::tie(a.level, a.problem_id, a.name, a.code_hash), std::tie(b.level, b.problem_id, b.name, b.code_hash))
        << a.name;
    EXPECT_NE(a.path.find("level_" + std::to_string(a.level) + "-00000-of-00001.parquet"), std::string::npos);
  }
  auto ids = parse_id_ranges("1,9");
  ASSERT_TRUE(ids.ok());
  auto some = load_problems(dir_.string(), Selection{{1}, *ids}, AK_PYTHON);
  ASSERT_TRUE(some.ok());
  ASSERT_EQ(some->size(), 2u);
  EXPECT_EQ((*some)[1].name, "9_Softmax.py");
}

TEST_F(HfDatasetTest, ARowOfAnotherLevelThanItsSplitAndAMissingPythonAreErrors) {
  write_split(1, 2);
  auto bad = load_problems(dir_.string(), {}, AK_PYTHON);
  EXPECT_FALSE(bad.ok());
  fs::remove_all(dir_ / "data");
  write_split(1, 1);
  auto no_python = load_problems(dir_.string(), {}, (dir_ / "no-such-python").string());
  EXPECT_FALSE(no_python.ok());
  fs::remove_all(dir_ / "data");
  EXPECT_FALSE(has_hf_dataset(dir_.string()));
  auto none = load_problems(dir_.string(), {}, AK_PYTHON);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("parquet"), std::string::npos) << none.status().message();
}

}  // namespace
}  // namespace ak::kernelbench
