#include "kernelbench/builtin.h"

#include <gtest/gtest.h>

#include "kernels/registry.h"
#include "tests/kernelbench/builtin_fixture.h"

namespace ak::kernelbench::testing {
namespace {

using BuiltinTest = BuiltinFixture;

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  const size_t p = s.find(from);
  EXPECT_NE(p, std::string::npos) << from;
  if (p != std::string::npos) s.replace(p, from.size(), to);
  return s;
}

TEST_F(BuiltinTest, CoveredProblemsGetTheLibrarysSourceVerbatimWithTheDefaultConfigurationAndTheirShape) {
  struct Case {
    int id;
    std::string type;
    std::vector<int64_t> shape;
  };
  for (const Case& k : {Case{23, "softmax", {16, 300}}, Case{40, "layernorm", {4, 105}},
                        Case{8, "matmul", {37, 53, 87}}, Case{95, "cross_entropy", {16, 300}}}) {
    SCOPED_TRACE(k.type);
    auto c = builtin_candidate(problem(k.id), BuiltinOptions{});
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->kernel_type, k.type);
    EXPECT_EQ(c->declared_shape, k.shape);
    EXPECT_FALSE(c->tuned);
    const auto& src = kernels::find(k.type)->backends.at(Backend::kTriton);
    EXPECT_EQ(c->config, kernels::default_config(src, DType::kF32));
    EXPECT_NE(c->source.find(src.source), std::string::npos) << "the library's Triton source, verbatim";
    EXPECT_NE(c->source.find("class ModelNew(nn.Module):"), std::string::npos);
    EXPECT_NE(c->source.find("# Configuration from default"), std::string::npos);
    EXPECT_NE(c->source.find(src.entry + "["), std::string::npos) << "the kernel is launched";
    EXPECT_NE(c->source.find("num_warps="), std::string::npos);
  }
  // The matmul grid uses the configuration's tiles.
  auto mm = builtin_candidate(problem(8), BuiltinOptions{});
  ASSERT_TRUE(mm.ok());
  EXPECT_NE(mm->source.find("triton.cdiv(M, " + std::to_string(mm->config.at("BM")) + ")"), std::string::npos);
  EXPECT_NE(mm->source.find("BK=" + std::to_string(mm->config.at("BK"))), std::string::npos);
  // Every listed problem has a kernel type with a Triton source.
  for (const auto& [name, type] : builtin_problems()) {
    const kernels::KernelSpec* spec = kernels::find(type);
    ASSERT_NE(spec, nullptr) << name;
    EXPECT_TRUE(spec->backends.count(Backend::kTriton)) << name;
  }
}

TEST_F(BuiltinTest, ProblemsTheTemplatesDoNotMatchExactlyAreNotCoveredAndSayWhy) {
  // Softmax over dim 0, a layernorm with another eps, a 3-D matmul operand, targets that may be
  // ignore_index, RMSNorm over dim 1, an unlisted problem, a level-2 problem.
  write("other/level1/23_Softmax.py", replaced(kSoftmax, "dim=1", "dim=0"));
  write("other/level1/40_LayerNorm.py",
        replaced(kLayerNorm, "nn.LayerNorm(normalized_shape=normalized_shape)",
                 "nn.LayerNorm(normalized_shape=normalized_shape, eps=1e-6)"));
  write("other/level1/8_Matmul_with_irregular_shapes_.py", replaced(kMatmul, "torch.rand(M, K)", "torch.rand(2, M, K)"));
  write("other/level1/95_CrossEntropyLoss.py", replaced(kCrossEntropy, "torch.randint(0,", "torch.randint(-100,"));
  write("other/level1/36_RMSNorm_.py", kSoftmax);
  write("other/level1/19_ReLU.py", kSoftmax);
  write("other/level2/23_Softmax.py", kSoftmax);
  struct Case {
    int level, id;
    std::string reason;
  };
  for (const Case& k : {
           Case{1, 23, "Model.forward's body is `return torch.softmax(x,dim=0)`"},
           Case{1, 40, "Model.__init__'s body is"},
           Case{1, 8, "get_inputs returns [float 3-D, float 2-D]; the template expects two 2-D float tensors"},
           Case{1, 95, "targets are torch.randint(-100, num_classes, ...)"},
           Case{1, 36, "normalizes over dim 1"},
           Case{1, 19, "no built-in template for this problem"},
           Case{2, 23, "level 1 only"},
       }) {
    SCOPED_TRACE(std::to_string(k.level) + "/" + std::to_string(k.id));
    auto ps = load_problems((dir_ / "other").string(), Selection{{k.level}, {k.id}});
    ASSERT_TRUE(ps.ok() && ps->size() == 1);
    auto c = builtin_candidate(ps->front(), BuiltinOptions{});
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
    EXPECT_NE(c.status().message().find(k.reason), std::string::npos) << c.status().message();
  }
}

TEST_F(BuiltinTest, ATemplateSaysWhichShapeItCannotServeInsteadOfBeingTried) {
  // One program per row in a 1-D grid: 2^31 rows are one more than CUDA's grid holds in x.
  write("other/level1/23_Softmax.py", replaced(kSoftmax, "batch_size = 4 * 4", "batch_size = 2 * 1024 * 1024 * 1024"));
  auto ps = load_problems((dir_ / "other").string(), Selection{{1}, {23}});
  ASSERT_TRUE(ps.ok() && ps->size() == 1);
  auto c = builtin_candidate(ps->front(), BuiltinOptions{});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("template softmax cannot serve shape [2147483648, 300]"), std::string::npos)
      << c.status().message();
  // A row of any width is served: each program walks it in BLOCK-wide steps (KernelBench's 23 is
  // 4096 x 393216).
  write("other/level1/23_Softmax.py", replaced(kSoftmax, "dim = 300", "dim = 393216"));
  ps = load_problems((dir_ / "other").string(), Selection{{1}, {23}});
  ASSERT_TRUE(ps.ok() && ps->size() == 1);
  auto wide = builtin_candidate(ps->front(), BuiltinOptions{});
  ASSERT_TRUE(wide.ok()) << wide.status().to_string();
  EXPECT_EQ(wide->declared_shape, (std::vector<int64_t>{16, 393216}));
}

TEST_F(BuiltinTest, APythonThatCannotRunTheMatcherIsAnErrorNotANotCovered) {
  BuiltinOptions o;
  o.python = (dir_ / "no-such-python").string();
  auto c = builtin_candidate(problem(23), o);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().code(), StatusCode::kNotFound) << c.status().to_string();
}

TEST_F(BuiltinTest, ShapesThatAreNotIntegerArithmeticStillGenerateWithTheDefaultConfiguration) {
  write("other/level1/23_Softmax.py", replaced(kSoftmax, "dim = 300", "dim = int(300.0)"));
  auto ps = load_problems((dir_ / "other").string(), Selection{{1}, {23}});
  ASSERT_TRUE(ps.ok() && ps->size() == 1);
  auto tuned = kernels::TunedConfigs::parse(nlohmann::json::parse(R"({"format": 1, "entries": [
      {"kernel_type": "softmax", "gpu_model": "NVIDIA H200", "dtype": "fp32", "backend": "triton", "shape": [16, 300],
       "config": {"BLOCK": 512, "AK_NUM_WARPS": 4, "AK_NUM_STAGES": 1}}]})"));
  ASSERT_TRUE(tuned.ok());
  auto c = builtin_candidate(ps->front(), BuiltinOptions{"fp32", &*tuned, "t.json", "NVIDIA H200"});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(c->declared_shape.empty());
  EXPECT_FALSE(c->tuned);
  EXPECT_NE(c->source.find("not evaluated (16, ?)"), std::string::npos);
  EXPECT_NE(c->config_origin.find("not consulted"), std::string::npos) << c->config_origin;
}

TEST_F(BuiltinTest, ATunedEntryChoosesTheConfigurationByTheDeclaredShapeAndTheHeaderSaysWhich) {
  auto tuned = kernels::TunedConfigs::parse(nlohmann::json::parse(R"({"format": 1, "entries": [
      {"kernel_type": "softmax", "gpu_model": "NVIDIA H200", "dtype": "fp16", "backend": "triton", "shape": [16, 300],
       "config": {"BLOCK": 512, "AK_NUM_WARPS": 16, "AK_NUM_STAGES": 2}},
      {"kernel_type": "matmul", "gpu_model": "NVIDIA H200", "dtype": "fp16", "backend": "triton", "shape": [4096, 4096, 4096],
       "config": {"BM": 64, "BN": 256, "BK": 64, "GROUP_M": 1, "AK_NUM_WARPS": 4, "AK_NUM_STAGES": 4}},
      {"kernel_type": "layernorm", "gpu_model": "NVIDIA H200", "dtype": "fp16", "shape": [4, 105],
       "config": {"AK_THREADS": 256, "AK_VEC": 4}}]})"));
  ASSERT_TRUE(tuned.ok()) << tuned.status().to_string();
  const BuiltinOptions o{"fp16", &*tuned, "tuning.json", "nvidia h200"};

  auto sm = builtin_candidate(problem(23), o);
  ASSERT_TRUE(sm.ok()) << sm.status().to_string();
  EXPECT_TRUE(sm->tuned);
  EXPECT_EQ(sm->config, (std::map<std::string, int64_t>{{"BLOCK", 512}, {"AK_NUM_WARPS", 16}, {"AK_NUM_STAGES", 2}}));
  EXPECT_NE(sm->source.find("BLOCK=512, num_warps=16, num_stages=2"), std::string::npos);
  EXPECT_NE(sm->source.find("tuned: tuning database tuning.json (nvidia h200, triton, fp16), entry at the declared shape [16, 300]"),
            std::string::npos);

  auto mm = builtin_candidate(problem(8), o);  // [37, 53, 87]: the nearest tuned shape
  ASSERT_TRUE(mm.ok());
  EXPECT_TRUE(mm->tuned);
  EXPECT_EQ(mm->config.at("BN"), 256);
  EXPECT_NE(mm->config_origin.find("nearest tuned shape [4096, 4096, 4096]"), std::string::npos) << mm->config_origin;
  EXPECT_NE(mm->source.find("triton.cdiv(N, 256)"), std::string::npos);

  // An entry without a backend that holds the cuda starter's tunables is not a Triton configuration.
  auto ln = builtin_candidate(problem(40), o);
  ASSERT_TRUE(ln.ok());
  EXPECT_FALSE(ln->tuned);
  EXPECT_NE(ln->config_origin.find("not a Triton tunable"), std::string::npos) << ln->config_origin;

  // Another precision or GPU model has no entry: the default, and the header says so.
  auto fp32 = builtin_candidate(problem(23), BuiltinOptions{"fp32", &*tuned, "tuning.json", "NVIDIA H200"});
  ASSERT_TRUE(fp32.ok());
  EXPECT_FALSE(fp32->tuned);
  EXPECT_NE(fp32->config_origin.find("has no softmax entry"), std::string::npos) << fp32->config_origin;

  auto no_model = builtin_candidate(problem(23), BuiltinOptions{"fp16", &*tuned, "tuning.json", ""});
  EXPECT_EQ(no_model.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(builtin_candidate(problem(23), BuiltinOptions{"fp64", nullptr, "", ""}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(BuiltinTest, GeneratedFilesAreValidPythonThatDefinesModelNew) {
  const char* check =
      "import ast, sys\n"
      "for path in sys.argv[1:]:\n"
      "    tree = ast.parse(open(path).read(), path)\n"
      "    names = [n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))]\n"
      "    assert 'ModelNew' in names, (path, names)\n"
      "    compile(open(path).read(), path, 'exec')\n";
  std::vector<std::string> argv = {AK_PYTHON, "-c", check};
  for (int id : {23, 40, 8, 95})
    for (const char* precision : {"fp32", "bf16"}) argv.push_back(candidate_file(id, precision));
  auto [rc, out] = run(argv, {}, std::chrono::seconds(120));
  EXPECT_EQ(rc, 0) << out;
}

// The generated kernels run on CPU tensors under Triton's interpreter (TRITON_INTERPRET=1; the
// sitecustomize in tests/kernelbench/triton_interpreter/ adapts it to NumPy 2.4), through the
// harness's CPU path: KernelBench's correctness trials against the problem's Model.
TEST_F(BuiltinTest, GeneratedCandidatesAreCorrectUnderTritonsInterpreterOnTheCpu) {
  const std::vector<std::string> env = {
      "TRITON_INTERPRET=1", "OMP_NUM_THREADS=1",
      "PYTHONPATH=" + std::string(AK_SOURCE_DIR) + "/tests/kernelbench/triton_interpreter"};
  for (int id : {23, 40, 8, 95}) {
    SCOPED_TRACE(id);
    // strict once (the static scan of a generated file must be clean), faithful only otherwise
    const nlohmann::json r = harness(id, "fp32", "cpu", env, id == 23);
    ASSERT_TRUE(r.is_object());
    EXPECT_EQ(r.value("verdict", ""), "correct") << r.dump(2);
    if (id == 23) {
      EXPECT_EQ(r["strict"]["static_scan"]["errors"], nlohmann::json::array()) << r["strict"].dump(2);
    }
  }
  // fp16: the kernels take the dtype from the tensors.
  const nlohmann::json half = harness(23, "fp16", "cpu", env, false);
  ASSERT_TRUE(half.is_object());
  EXPECT_EQ(half.value("verdict", ""), "correct") << half.dump(2);
}

}  // namespace
}  // namespace ak::kernelbench::testing
