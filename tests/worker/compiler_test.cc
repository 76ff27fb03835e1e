#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>

#include "kernels/registry.h"
#include "worker/compiler.h"

namespace ak {
namespace {

namespace fs = std::filesystem;

class CompilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "ak-compiler-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    CompilerOptions o;
    o.cache_dir = (dir_ / "cache").string();
    o.python = AK_PYTHON;
    compiler_ = make_compiler(o);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static JobSpec job(Backend b, DType d = DType::kF32) {
    JobSpec j;
    j.job_id = "j1";
    j.kernel_type = "softmax";
    j.requires_.backend = b;
    j.dtype = d;
    j.shape = {64, 1024};
    const kernels::BackendSource& s = kernels::find("softmax")->backends.at(b);
    j.source = s.source;
    j.config = kernels::default_config(s.space);
    return j;
  }
  static Capabilities cpu_caps() {
    Capabilities c;
    c.arch = "x86_64";
    return c;
  }
  static Capabilities gpu_caps(const std::string& arch) {
    Capabilities c;
    c.arch = arch;
    return c;
  }
  static std::string read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  fs::path dir_;
  std::unique_ptr<Compiler> compiler_;
};

TEST_F(CompilerTest, CpuSourceBuildsASharedObjectWithTheEntryPoint) {
  auto art = compiler_->compile(job(Backend::kCpu), cpu_caps());
  ASSERT_TRUE(art.ok()) << art.status().to_string();
  EXPECT_FALSE(art->cache_hit);
  EXPECT_GT(art->compile_ms, 0);
  EXPECT_EQ(art->entry, "ak_softmax_cpu");
  EXPECT_EQ(art->source_hash.size(), 16u);
  EXPECT_EQ(art->options_hash.size(), 16u);
  void* h = dlopen(art->path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  using Fn = int (*)(const void*, void*, int64_t, int64_t, int);
  auto fn = reinterpret_cast<Fn>(dlsym(h, "ak_softmax_cpu"));
  ASSERT_NE(fn, nullptr);
  float in[5] = {1, 2, 3, 4, 5}, out[5] = {};
  ASSERT_EQ(fn(in, out, 1, 5, 0), 0);
  float sum = 0;
  for (float v : out) sum += v;
  EXPECT_NEAR(sum, 1.0f, 1e-6);
  EXPECT_NEAR(out[4], 0.63640865f, 1e-6);
  dlclose(h);
}

TEST_F(CompilerTest, SecondCompileOfTheSameJobIsACacheHit) {
  auto a = compiler_->compile(job(Backend::kCpu), cpu_caps());
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  auto b = compiler_->compile(job(Backend::kCpu), cpu_caps());
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_TRUE(b->cache_hit);
  EXPECT_EQ(b->compile_ms, 0);
  EXPECT_EQ(a->path, b->path);
  EXPECT_EQ(a->options_hash, b->options_hash);

  JobSpec other = job(Backend::kCpu);
  other.config["AK_ONLINE"] = 1;
  auto c = compiler_->compile(other, cpu_caps());
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_FALSE(c->cache_hit);
  EXPECT_NE(c->path, a->path);
  EXPECT_NE(c->options_hash, a->options_hash);
  EXPECT_EQ(c->source_hash, a->source_hash);
  // no temp files left behind
  for (const auto& e : fs::directory_iterator(dir_ / "cache"))
    EXPECT_NE(e.path().filename().string().rfind(".tmp-", 0), 0u) << e.path();
}

TEST_F(CompilerTest, EmptySourceMeansTheStarterSource) {
  JobSpec j = job(Backend::kCpu);
  auto a = compiler_->compile(j, cpu_caps());
  j.source.clear();
  auto b = compiler_->compile(j, cpu_caps());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->path, b->path);
}

TEST_F(CompilerTest, CpuCompileErrorIsInvalidArgumentWithTheLog) {
  JobSpec j = job(Backend::kCpu);
  j.source = "extern \"C\" int ak_softmax_cpu() { return undeclared_thing; }\n";
  auto art = compiler_->compile(j, cpu_caps());
  ASSERT_FALSE(art.ok());
  EXPECT_EQ(art.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(art.status().message().find("undeclared_thing"), std::string::npos) << art.status().message();
}

TEST_F(CompilerTest, RejectsUnknownKernelTypeAndBadConfigNames) {
  JobSpec j = job(Backend::kCpu);
  j.kernel_type = "nope";
  EXPECT_EQ(compiler_->compile(j, cpu_caps()).status().code(), StatusCode::kInvalidArgument);
  j = job(Backend::kCpu);
  j.config["A -o /tmp/x"] = 1;
  EXPECT_EQ(compiler_->compile(j, cpu_caps()).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(CompilerTest, NvrtcBuildsSm90aCubinsForEveryDtypeAndSeveralConfigs) {
  const kernels::BackendSource& s = kernels::find("softmax")->backends.at(Backend::kCuda);
  auto points = kernels::enumerate_space(s.space);
  ASSERT_GE(points.size(), 8u);
  std::set<std::string> paths;
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16}) {
    // every fourth point: all values of every tunable still appear
    for (size_t i = d == DType::kF32 ? 0 : 1; i < points.size(); i += 3) {
      JobSpec j = job(Backend::kCuda, d);
      j.config = points[i];
      auto art = compiler_->compile(j, gpu_caps("sm_90a"));
      ASSERT_TRUE(art.ok()) << dtype_name(d) << " " << config_string(j.config) << ": " << art.status().to_string();
      EXPECT_EQ(art->entry, "ak_softmax");
      std::string bin = read(art->path);
      ASSERT_GE(bin.size(), 4u);
      EXPECT_EQ(bin.substr(0, 4), std::string("\x7f" "ELF")) << "a cubin, not PTX";
      EXPECT_EQ(bin.find(".version"), std::string::npos) << "no PTX text";
      paths.insert(art->path);
    }
  }
  EXPECT_GE(paths.size(), 9u);
}

// KernelSpec::cuda_config_error agrees with the starter's #error lines: for every type that has
// one, configurations it accepts compile at sm_90a and those it rejects do not (two accepted and
// four rejected per dtype, spread over the space; a predicate shared by several types, as
// fused_mlp's is matmul's and flash_attention_causal's flash_attention's, once: a compile of an
// accepted one takes seconds on 2 cores).
TEST_F(CompilerTest, CudaConfigErrorPredictsWhichStarterConfigurationsCompile) {
  size_t checked = 0;
  std::set<std::string (*)(const std::map<std::string, int64_t>&, DType)> seen;
  for (const kernels::KernelSpec* k : kernels::all()) {
    if (!k->cuda_config_error || !seen.insert(k->cuda_config_error).second) continue;
    const kernels::BackendSource& src = k->backends.at(Backend::kCuda);
    const auto points = kernels::enumerate_space(src.space);
    for (DType d : {DType::kF32, DType::kBF16}) {
      int accepted = 0, rejected = 0;
      // A stride prime to the space's size visits it in a scattered order.
      for (size_t n = 0, i = 7; n < points.size() && (accepted < 2 || rejected < 4); ++n, i = (i + 211) % points.size()) {
        const std::string why = k->cuda_config_error(points[i], d);
        if (why.empty() ? accepted >= 2 : rejected >= 4) continue;
        (why.empty() ? accepted : rejected)++;
        JobSpec j = job(Backend::kCuda, d);
        j.kernel_type = k->name;
        j.shape = src.default_shapes.at(0);
        j.source = src.source;
        j.config = points[i];
        auto art = compiler_->compile(j, gpu_caps("sm_90a"));
        EXPECT_EQ(art.ok(), why.empty()) << k->name << " " << dtype_name(d) << " " << config_string(j.config)
                                         << ": predicted '" << why << "', compiler: "
                                         << (art.ok() ? "ok" : art.status().message().substr(0, 300));
        ++checked;
      }
      EXPECT_EQ(accepted, 2) << k->name << " " << dtype_name(d);
      EXPECT_EQ(rejected, 4) << k->name << " " << dtype_name(d);
    }
  }
  EXPECT_GE(checked, 2u * 2 * 6) << "matmul and flash_attention have the predicate";
}

// The register budget of the wgmma paths: a thread of a block of B threads gets at most 65536 / B
// registers (in steps of 8), and ptxas stops when the accumulators and the rest do not fit. A study
// on an H100 proposed 256x256 tiles on four warpgroups, which gemm_config_error let through and
// NVRTC refused; it now predicts both sides of the boundary, with TMA's producer warpgroup counted.
TEST_F(CompilerTest, GemmConfigErrorPredictsTheWgmmaPathsRegisterBudget) {
  const kernels::KernelSpec* mm = kernels::find("matmul");
  struct Case {
    int64_t bm, bn, bk, wgmma, stages;
    bool builds;
  };
  for (const Case& c : {Case{256, 256, 32, 1, 5, false},    // 128 accumulators, 128 registers (512 threads)
                        Case{256, 256, 64, 2, 3, false},    // 128 accumulators, 96 registers (640 threads)
                        Case{256, 128, 64, 2, 4, true}}) {  // 64 accumulators, 96 registers
    JobSpec j = job(Backend::kCuda, DType::kBF16);
    j.kernel_type = "matmul";
    j.shape = {4096, 4096, 4096};
    j.source = mm->backends.at(Backend::kCuda).source;
    j.config = {{"AK_BM", c.bm},   {"AK_BN", c.bn},       {"AK_BK", c.bk},
                {"AK_WARPS_M", 4}, {"AK_WARPS_N", 4},     {"AK_STAGES", c.stages},
                {"AK_GROUP_M", 8}, {"AK_WGMMA", c.wgmma}, {"AK_MAX_BLOCKS", 0}};
    const std::string why = mm->cuda_config_error(j.config, DType::kBF16);
    EXPECT_EQ(why.empty(), c.builds) << config_string(j.config) << ": " << why;
    if (!c.builds) {
      EXPECT_NE(why.find("accumulators a thread and about 32 registers more exceed"), std::string::npos);
    }
    auto art = compiler_->compile(j, gpu_caps("sm_90a"));
    EXPECT_EQ(art.ok(), c.builds) << config_string(j.config) << ": "
                                  << (art.ok() ? "built" : art.status().message().substr(0, 300));
    if (!c.builds && !art.ok()) {
      EXPECT_NE(art.status().message().find("Insufficient registers"), std::string::npos) << art.status().message();
    }
  }
}

// matmul's Hopper path (kernels/matmul/wgmma.cuh) is compiled at sm_90a and only there: with
// AK_WGMMA=1 a configuration it can run builds for sm_90a in fp16 and bf16 (matmul, and fused_mlp,
// which includes it), one it cannot run (two stages) is refused there by the
// path's #error as gemm_config_error predicts, and at sm_80 the setting is ignored.
TEST_F(CompilerTest, MatmulsWgmmaPathBuildsAtSm90aAndItsConstraintsHoldThereAlone) {
  const kernels::KernelSpec* mm = kernels::find("matmul");
  const std::map<std::string, int64_t> wide = {{"AK_WARPS_M", 2}, {"AK_WARPS_N", 4}, {"AK_BN", 256},
                                               {"AK_BK", 64},     {"AK_STAGES", 4},  {"AK_WGMMA", 1}};
  // Valid for mma.sync, not for the wgmma ring, which needs three stages.
  const std::map<std::string, int64_t> two_stages = {{"AK_STAGES", 2}, {"AK_WGMMA", 1}};
  struct Case {
    const char* type;
    DType dtype;
    std::map<std::string, int64_t> config;
    const char* arch;
    bool builds;
  };
  // fused_mlp (three GEMM phases, one inlined GEMM) takes the longest: once, in bf16.
  const std::vector<Case> cases = {
      {"matmul", DType::kF16, wide, "sm_90a", true},        {"matmul", DType::kBF16, wide, "sm_90a", true},
      {"matmul", DType::kF16, two_stages, "sm_90a", false}, {"matmul", DType::kBF16, two_stages, "sm_90a", false},
      {"matmul", DType::kBF16, two_stages, "sm_80", true},  {"fused_mlp", DType::kBF16, wide, "sm_90a", true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(mm->cuda_config_error(c.config, c.dtype).empty(), c.config.at("AK_STAGES") == 4)
        << config_string(c.config);
    const kernels::BackendSource& src = kernels::find(c.type)->backends.at(Backend::kCuda);
    JobSpec j = job(Backend::kCuda, c.dtype);
    j.kernel_type = c.type;
    j.shape = src.default_shapes.at(0);
    j.source = src.source;
    j.config = c.config;
    j.timeout_ms = 600'000;  // a loaded 2-core host: compile time is not what this test is about
    auto art = compiler_->compile(j, gpu_caps(c.arch));
    EXPECT_EQ(art.ok(), c.builds) << c.type << " " << dtype_name(c.dtype) << " " << c.arch << " "
                                  << config_string(c.config) << ": "
                                  << (art.ok() ? "ok" : art.status().message().substr(0, 300));
    if (!c.builds && !art.ok()) {
      EXPECT_NE(art.status().message().find("AK_WGMMA=1 needs"), std::string::npos) << art.status().message();
    }
  }
}

// flash_attention's Hopper paths (kernels/flash_attention/wgmma.cuh) are compiled at sm_90a and
// only there: with AK_WGMMA=1 the fp16 and bf16 cubins (and the causal type's) differ from the
// mma.sync path's at sm_90a and equal them at sm_80, where the setting is ignored; a block of 32
// rows a warp (not one warpgroup per 64 rows) is refused at sm_90a alone, fp32 everywhere, and
// AK_WGMMA=2 (the overlapped one) with other than two stages, each as cuda_config_error predicts.
// AK_WGMMA=3 (the same fed by TMA) and 4 (3 with turns) build with their tensor map slots at sm_90a
// alone.
TEST_F(CompilerTest, FlashAttentionsWgmmaPathBuildsAtSm90aAloneAndItsConstraintsHoldThere) {
  const kernels::KernelSpec* fa = kernels::find("flash_attention");
  auto build = [&](const char* type, DType d, std::map<std::string, int64_t> config, const char* arch) {
    const kernels::BackendSource& src = kernels::find(type)->backends.at(Backend::kCuda);
    JobSpec j = job(Backend::kCuda, d);
    j.kernel_type = type;
    j.shape = src.default_shapes.at(0);
    j.source = src.source;
    j.config = std::move(config);
    j.timeout_ms = 600'000;  // a loaded 2-core host: compile time is not what this test is about
    return compiler_->compile(j, gpu_caps(arch));
  };
  const std::map<std::string, int64_t> on = {{"AK_WGMMA", 1}}, off = {{"AK_WGMMA", 0}};
  struct Case {
    const char* type;
    DType dtype;
    const char* arch;
    bool differs;
  };
  for (const Case& c : std::vector<Case>{{"flash_attention", DType::kBF16, "sm_90a", true},
                                         {"flash_attention", DType::kF16, "sm_90a", true},
                                         {"flash_attention_causal", DType::kBF16, "sm_90a", true},
                                         {"flash_attention", DType::kBF16, "sm_80", false}}) {
    EXPECT_EQ(fa->cuda_config_error(on, c.dtype), "");
    auto a = build(c.type, c.dtype, on, c.arch);
    auto b = build(c.type, c.dtype, off, c.arch);
    ASSERT_TRUE(a.ok() && b.ok()) << c.type << " " << c.arch << ": "
                                  << (a.ok() ? b.status().message() : a.status().message()).substr(0, 300);
    EXPECT_EQ(read(a->path) != read(b->path), c.differs) << c.type << " " << dtype_name(c.dtype) << " " << c.arch;
  }
  const std::map<std::string, int64_t> wide_warps = {{"AK_BLOCK_M", 128}, {"AK_WARPS", 4}, {"AK_WGMMA", 1}};
  EXPECT_NE(fa->cuda_config_error(wide_warps, DType::kBF16), "");
  auto refused = build("flash_attention", DType::kBF16, wide_warps, "sm_90a");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("AK_WGMMA=1 needs"), std::string::npos) << refused.status().message();
  EXPECT_TRUE(build("flash_attention", DType::kBF16, wide_warps, "sm_80").ok());
  // AK_WGMMA=2 runs its copies one tile ahead: two stages and no other count.
  const std::map<std::string, int64_t> overlap = {{"AK_WGMMA", 2}}, one_stage = {{"AK_WGMMA", 2}, {"AK_STAGES", 1}};
  EXPECT_EQ(fa->cuda_config_error(overlap, DType::kF16), "");
  auto o = build("flash_attention_causal", DType::kF16, overlap, "sm_90a");
  auto b = build("flash_attention_causal", DType::kF16, off, "sm_90a");
  ASSERT_TRUE(o.ok() && b.ok()) << (o.ok() ? b.status().message() : o.status().message()).substr(0, 300);
  EXPECT_NE(read(o->path), read(b->path));
  EXPECT_NE(fa->cuda_config_error(one_stage, DType::kF16), "");
  auto staged = build("flash_attention", DType::kF16, one_stage, "sm_90a");
  ASSERT_FALSE(staged.ok());
  EXPECT_NE(staged.status().message().find("AK_WGMMA=2, 3 or 4 needs AK_STAGES = 2"), std::string::npos)
      << staged.status().message();
  EXPECT_NE(fa->cuda_config_error(on, DType::kF32), "");
  auto fp32 = build("flash_attention", DType::kF32, on, "sm_80");
  ASSERT_FALSE(fp32.ok());
  EXPECT_NE(fp32.status().message().find("is for fp16/bf16"), std::string::npos) << fp32.status().message();

  // AK_WGMMA=3 (kernels/flash_attention/wgmma_tma.cuh): at sm_90a the module holds the tensor map
  // slots the sandbox fills (kernels/registry.h, kTensorMapSymbol), causal or not; at sm_80 it
  // builds without them (the producer warpgroup returns at once); one stage is refused.
  // AK_WGMMA=4 (the same with the warpgroups taking turns) builds alike; with 4 warps it is refused.
  const std::map<std::string, int64_t> tma = {{"AK_WGMMA", 3}}, tma_one_stage = {{"AK_WGMMA", 3}, {"AK_STAGES", 1}};
  const std::map<std::string, int64_t> turns = {{"AK_WGMMA", 4}};
  const std::map<std::string, int64_t> turns_alone = {{"AK_WGMMA", 4}, {"AK_WARPS", 4}, {"AK_BLOCK_M", 64}};
  for (const Case& c : std::vector<Case>{{"flash_attention", DType::kBF16, "sm_90a", true},
                                         {"flash_attention_causal", DType::kF16, "sm_90a", true},
                                         {"flash_attention", DType::kF16, "sm_80", false}}) {
    for (const auto& config : {tma, turns}) {
      EXPECT_EQ(fa->cuda_config_error(config, c.dtype), "");
      auto t = build(c.type, c.dtype, config, c.arch);
      ASSERT_TRUE(t.ok()) << c.type << " " << c.arch << ": " << t.status().message().substr(0, 300);
      EXPECT_EQ(read(t->path).find(kernels::kTensorMapSymbol) != std::string::npos, c.differs)
          << c.type << " " << c.arch << " " << config_string(config);
      // No wgmma serialised by ptxas (C7518: a branch while products are in flight; C7510: wgmma
      // in a called function), which costs the path most of its speed and nothing else shows.
      ASSERT_FALSE(t->cache_hit);
      EXPECT_EQ(t->diagnostics.find("serialized"), std::string::npos)
          << c.type << " " << c.arch << " " << config_string(config) << ": " << t->diagnostics;
    }
  }
  EXPECT_NE(fa->cuda_config_error(turns_alone, DType::kBF16), "");
  auto alone = build("flash_attention", DType::kBF16, turns_alone, "sm_80");
  ASSERT_FALSE(alone.ok());
  EXPECT_NE(alone.status().message().find("AK_WGMMA=4 needs AK_WARPS = 8"), std::string::npos)
      << alone.status().message();
  EXPECT_NE(fa->cuda_config_error(tma_one_stage, DType::kBF16), "");
  auto tma_staged = build("flash_attention", DType::kBF16, tma_one_stage, "sm_90a");
  ASSERT_FALSE(tma_staged.ok());
  EXPECT_NE(tma_staged.status().message().find("AK_WGMMA=2, 3 or 4 needs AK_STAGES = 2"), std::string::npos)
      << tma_staged.status().message();
}

// matmul's TMA path (AK_WGMMA=2, kernels/matmul/wgmma_tma.cuh) builds at sm_90a with the tensor
// map slots the sandbox fills (kernels/registry.h, kTensorMapSymbol), and at sm_80, where only
// the other paths exist (the producer warpgroup returns at once, no slots); with AK_BK 32 the
// path's #error refuses it as gemm_config_error predicts. fused_mlp, whose three GEMM phases read
// the sandbox's maps too (KernelSpec::cuda_phase_tensor_maps), builds with the slots at sm_90a, and
// so does the ping-pong path (AK_WGMMA=3), and fused_mlp's gate/up GEMM on either (AK_GATEUP=1),
// whose AK_BN of 64 its #error refuses as the spec's config_error predicts.
TEST_F(CompilerTest, MatmulsTmaPathBuildsWithItsMapSlotsAtSm90aAndWithoutThemAtSm80) {
  const std::map<std::string, int64_t> tma = {{"AK_WARPS_M", 2}, {"AK_WARPS_N", 4}, {"AK_BN", 256},
                                              {"AK_BK", 64},     {"AK_STAGES", 4},  {"AK_WGMMA", 2}};
  std::map<std::string, int64_t> bk32 = tma;
  bk32["AK_BK"] = 32;
  std::map<std::string, int64_t> pingpong = tma;  // two computing warpgroups, a 128 x 128 tile each
  pingpong["AK_BN"] = 128;
  pingpong["AK_WGMMA"] = 3;
  // fused_mlp's gate/up GEMM: 128 x 128 of Hd a tile (cooperative), 64 x 128 (ping-pong, AK_BM 64).
  std::map<std::string, int64_t> gateup = tma;
  gateup["AK_GATEUP"] = 1;
  std::map<std::string, int64_t> gateup_pingpong = gateup;
  gateup_pingpong["AK_WGMMA"] = 3;
  gateup_pingpong["AK_BM"] = 64;
  std::map<std::string, int64_t> gateup_bn64 = gateup;
  gateup_bn64["AK_BN"] = 64;
  gateup_bn64["AK_WARPS_N"] = 2;
  gateup_bn64["AK_WARPS_M"] = 4;
  const char* tma_bk = "AK_WGMMA=2 or 3 (TMA) needs AK_BK 64";
  struct Case {
    std::map<std::string, int64_t> config;
    const char* arch;
    bool builds;
    bool slots = false;
    const char* type = "matmul";
    const char* error = "";   // in the #error line a configuration that does not build hits
    const char* reason = "";  // the start of the spec's cuda_config_error for it
  };
  const std::vector<Case> cases = {
      {tma, "sm_90a", true, true},
      {tma, "sm_80", true, false},
      {bk32, "sm_90a", false, false, "matmul", tma_bk, "AK_WGMMA=2 (TMA) needs AK_BK 64"},
      {tma, "sm_90a", true, true, "fused_mlp"},
      {pingpong, "sm_90a", true, true},
      {gateup, "sm_90a", true, true, "fused_mlp"},
      {gateup_pingpong, "sm_90a", true, true, "fused_mlp"},
      {gateup, "sm_80", true, false, "fused_mlp"},
      {gateup_bn64, "sm_90a", false, false, "fused_mlp", "AK_GATEUP=1 needs fp16/bf16", "AK_GATEUP=1 needs fp16/bf16"}};
  for (const Case& c : cases) {
    const kernels::BackendSource& src = kernels::find(c.type)->backends.at(Backend::kCuda);
    JobSpec j = job(Backend::kCuda, DType::kBF16);
    j.kernel_type = c.type;
    j.shape = src.default_shapes.at(0);
    j.source = src.source;
    j.config = c.config;
    j.timeout_ms = 600'000;
    auto art = compiler_->compile(j, gpu_caps(c.arch));
    ASSERT_EQ(art.ok(), c.builds) << c.type << " " << c.arch << " " << config_string(c.config) << ": "
                                  << (art.ok() ? "ok" : art.status().message().substr(0, 300));
    if (!c.builds) {
      EXPECT_NE(art.status().message().find(c.error), std::string::npos) << art.status().message();
      const std::string reason = kernels::find(c.type)->cuda_config_error(c.config, DType::kBF16);
      EXPECT_EQ(reason.rfind(c.reason, 0), 0u) << reason;
      continue;
    }
    std::ifstream in(art.value().path, std::ios::binary);
    const std::string cubin((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(cubin.find(kernels::kTensorMapSymbol) != std::string::npos, c.slots) << c.arch;
    EXPECT_EQ(art->diagnostics.find("serialized"), std::string::npos)
        << c.type << " " << c.arch << " " << config_string(c.config)
        << ": wgmma serialised by ptxas: " << art->diagnostics;
  }
}

// A cuda build that succeeds keeps the PTX assembler's messages (CompiledArtifact::diagnostics),
// where a wgmma path's serialisation (C7518, C7510) shows and nothing else does; a cache hit has
// none. Here: a launch bound whose blocks per SM cannot fit, which ptxas warns about and ignores.
TEST_F(CompilerTest, ACudaBuildThatSucceedsKeepsThePtxAssemblersMessages) {
  JobSpec j = job(Backend::kCuda);
  j.source =
      "extern \"C\" __global__ void __launch_bounds__(1024, 4) ak_softmax(float* y) { y[threadIdx.x] *= 2.0f; }\n";
  j.config.clear();
  auto art = compiler_->compile(j, gpu_caps("sm_90a"));
  ASSERT_TRUE(art.ok()) << art.status().message();
  EXPECT_FALSE(art->cache_hit);
  EXPECT_NE(art->diagnostics.find("ptxas warning"), std::string::npos) << art->diagnostics;
  EXPECT_NE(art->diagnostics.find("minnctapersm"), std::string::npos) << art->diagnostics;
  // For the worker's log: the assembler's lines alone, on one line.
  const std::string notes = ptxas_notes(art->diagnostics);
  EXPECT_EQ(notes.rfind("ptxas warning", 0), 0u) << notes;
  EXPECT_EQ(notes.find('\n'), std::string::npos) << notes;
  EXPECT_EQ(ptxas_notes("x.cu(1): warning: #warning directive: job 7 PASS\nptxas info : (C7518) serialized\r\n"
                        "ptxas warning : two\n"),
            "ptxas info : (C7518) serialized  | ptxas warning : two")
      << "a candidate's own line is left out; its line breaks forge no log line";
  EXPECT_EQ(ptxas_notes(std::string(3000, 'x')), "");
  EXPECT_EQ(ptxas_notes("ptxas " + std::string(3000, 'y')).size(), 1003u);
  auto again = compiler_->compile(j, gpu_caps("sm_90a"));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->cache_hit);
  EXPECT_EQ(again->diagnostics, "");
  j.source = "extern \"C\" __global__ void ak_softmax(float* y) { y[threadIdx.x] *= 2.0f; }\n";
  auto quiet = compiler_->compile(j, gpu_caps("sm_90a"));
  ASSERT_TRUE(quiet.ok());
  EXPECT_EQ(quiet->diagnostics, "") << "a build with nothing to say";
}

// Every kernel type's starters build with their default configuration: cuda for sm_90a (Hopper)
// and sm_80 (the fallback of older GPUs) in every dtype, cpu in fp32.
TEST_F(CompilerTest, EveryKernelTypesStartersBuildWithTheirDefaultConfig) {
  for (const kernels::KernelSpec* k : kernels::all()) {
    for (const auto& [backend, src] : k->backends) {
      if (backend == Backend::kTriton) continue;  // TritonStartersBuild... below
      for (DType d : k->dtypes) {
        if (backend == Backend::kCpu && d != DType::kF32) continue;
        for (const char* arch : {"sm_90a", "sm_80"}) {
          if (backend == Backend::kCpu && std::string(arch) != "sm_90a") continue;
          JobSpec j = job(backend, d);
          j.kernel_type = k->name;
          j.shape = k->backends.at(backend).default_shapes.at(0);
          j.source = src.source;
          j.config = kernels::default_config(src, d);
          auto art = compiler_->compile(j, backend == Backend::kCpu ? cpu_caps() : gpu_caps(arch));
          ASSERT_TRUE(art.ok()) << k->name << " " << backend_name(backend) << " " << dtype_name(d) << " " << arch
                                << ": " << art.status().to_string();
          EXPECT_EQ(art->entry, src.entry);
        }
      }
    }
  }
}

// The sizes [bytes] of an ELF64 (little-endian) file's sections by name, read from its section
// headers: a cubin's. nullopt when the bytes are no such file or a header points outside them.
std::optional<std::map<std::string, uint64_t>> elf_section_sizes(const std::string& elf) {
  auto u16 = [&](size_t at) { return uint64_t(uint8_t(elf[at])) | uint64_t(uint8_t(elf[at + 1])) << 8; };
  auto u32 = [&](size_t at) { return u16(at) | u16(at + 2) << 16; };
  auto u64 = [&](size_t at) { return u32(at) | u32(at + 4) << 32; };
  // "\177ELF", 64-bit, little-endian
  if (elf.size() < 64 || elf.compare(0, 4, "\177ELF") != 0 || elf[4] != 2 || elf[5] != 1) return std::nullopt;
  const uint64_t shoff = u64(0x28), shentsize = u16(0x3a), shnum = u16(0x3c), shstrndx = u16(0x3e);
  if (shentsize < 64 || shstrndx >= shnum || shoff > elf.size() || shnum * shentsize > elf.size() - shoff)
    return std::nullopt;
  auto header = [&](uint64_t i) { return size_t(shoff + i * shentsize); };  // sh_name at 0, sh_size at 32
  const uint64_t names = u64(header(shstrndx) + 24), names_size = u64(header(shstrndx) + 32);
  if (names > elf.size() || names_size > elf.size() - names) return std::nullopt;
  std::map<std::string, uint64_t> out;
  for (uint64_t i = 0; i < shnum; ++i) {
    const uint64_t name = u32(header(i));
    if (name >= names_size) return std::nullopt;
    const char* text = elf.data() + names + name;
    out[std::string(text, strnlen(text, names_size - name))] = u64(header(i) + 32);
  }
  return out;
}

// The shared memory sections of kernel `entry` in a cubin [bytes]: its window ".nv.shared.<entry>"
// (SHT_NOBITS: the static variables, padded to the dynamic part's alignment) and any
// ".nv.shared.reserved.*" (what the toolkit reserves for itself); 0 for a kernel that has none.
uint64_t shared_section_bytes(const std::map<std::string, uint64_t>& sections, const std::string& entry) {
  uint64_t bytes = 0;
  for (const auto& [name, size] : sections)
    if (name == ".nv.shared." + entry || name.rfind(".nv.shared.reserved.", 0) == 0) bytes += size;
  return bytes;
}

// KernelSpec::cuda_static_shared_bytes bounds the static shared memory of the type's cuda starter,
// which the coordinator's launch check counts beside the dynamic part (coordinator/study.cc) and
// the sandbox refuses a launch over the GPU's limit with: measured in the sm_90a cubins (the
// Hopper paths have the most: TMA's mbarriers) of every type in every dtype at its default
// configuration, and of matmul and fused_mlp at the TMA paths with the space's most stages, whose
// mbarriers grow with them (one dtype each: the barriers do not depend on it; fused_mlp's builds
// are the slowest of all, and its GEMMs are matmul's: its TMA path alone, with the gate/up GEMM's
// slot lookup), and of the flash types at their TMA path (AK_WGMMA=3). A norm at another eps
// (KernelSpec::family) is its base's source with another literal and carries its base's bound
// (with_eps): not compiled again.
//
// At sm_90 ptxas (CUDA 13) starts each kernel's window with the 1 KiB the driver reserves a block
// (CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, outside the opt-in limit), which neither
// its "bytes smem" nor the driver's CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES counts: that prefix is
// measured as the window of a kernel with dynamic shared memory alone, and taken off.
TEST_F(CompilerTest, EveryStartersStaticSharedMemoryIsWithinItsSpecsBound) {
  auto sections_of = [&](const JobSpec& j) -> std::map<std::string, uint64_t> {
    auto art = compiler_->compile(j, gpu_caps("sm_90a"));
    EXPECT_TRUE(art.ok()) << j.kernel_type << " " << dtype_name(j.dtype) << " " << config_string(j.config) << ": "
                          << art.status().to_string();
    if (!art.ok()) return {};
    auto sections = elf_section_sizes(read(art->path));
    EXPECT_TRUE(sections.has_value()) << art->path << " is no cubin this test can read";
    return sections.value_or(std::map<std::string, uint64_t>{});
  };
  JobSpec dynamic_only = job(Backend::kCuda);
  dynamic_only.source =
      "extern \"C\" __global__ void ak_softmax(float* y) {\n"
      "  extern __shared__ float s[];\n"
      "  s[threadIdx.x] = y[threadIdx.x];\n"
      "  __syncthreads();\n"
      "  y[threadIdx.x] = s[threadIdx.x ^ 1];\n"
      "}\n";
  const uint64_t reserved = shared_section_bytes(sections_of(dynamic_only), "ak_softmax");
  ASSERT_FALSE(HasFailure());
  EXPECT_TRUE(reserved == 0 || reserved == 1024) << reserved << " B: a new layout of the shared memory window";

  for (const kernels::KernelSpec* k : kernels::all()) {
    auto it = k->backends.find(Backend::kCuda);
    if (it == k->backends.end()) continue;
    if (!k->family.empty()) {
      EXPECT_EQ(k->cuda_static_shared_bytes, kernels::find(k->family)->cuda_static_shared_bytes) << k->name;
      continue;
    }
    const kernels::BackendSource& src = it->second;
    std::vector<std::pair<DType, std::map<std::string, int64_t>>> builds;
    // fused_mlp's default paths are matmul's GEMM, measured there; its TMA build below stays (its
    // builds are the slowest of all).
    if (k->name != "fused_mlp")
      for (DType d : k->dtypes) builds.push_back({d, kernels::default_config(src, d)});
    if (k->name == "matmul" || k->name == "fused_mlp") {
      // The TMA paths (AK_WGMMA 2 and up) at the most stages, on 2 x 4 computing warps, which every
      // such path can run: matmul each in fp16, fused_mlp the last in bf16.
      const DType d = k->name == "matmul" ? DType::kF16 : DType::kBF16;
      int64_t stages = 0;
      std::vector<int64_t> paths;
      for (const kernels::Tunable& t : src.space) {
        if (t.name == "AK_STAGES") stages = *std::max_element(t.values.begin(), t.values.end());
        if (t.name == "AK_WGMMA")
          for (int64_t v : t.values)
            if (v >= 2 && (k->name == "matmul" || v == *std::max_element(t.values.begin(), t.values.end())))
              paths.push_back(v);
      }
      ASSERT_FALSE(paths.empty()) << k->name;
      for (int64_t path : paths) {
        std::map<std::string, int64_t> tma = kernels::default_config(src, d);
        tma["AK_WGMMA"] = path;
        tma["AK_BK"] = 64;
        tma["AK_STAGES"] = stages;
        tma["AK_WARPS_M"] = 2;
        tma["AK_WARPS_N"] = 4;
        if (k->name == "fused_mlp") tma["AK_GATEUP"] = 1;  // its block's slot lookup
        ASSERT_EQ(k->cuda_config_error(tma, d), "") << k->name << " " << config_string(tma);
        builds.push_back({d, tma});
      }
    }
    if (k->name == "flash_attention" || k->name == "flash_attention_causal") {
      // The TMA path (AK_WGMMA=3) and its mbarriers, in bf16.
      std::map<std::string, int64_t> tma = kernels::default_config(src, DType::kBF16);
      tma["AK_WGMMA"] = 3;
      ASSERT_EQ(k->cuda_config_error(tma, DType::kBF16), "") << k->name << " " << config_string(tma);
      builds.push_back({DType::kBF16, tma});
    }
    uint64_t most = 0;
    for (const auto& [d, config] : builds) {
      JobSpec j = job(Backend::kCuda, d);
      j.kernel_type = k->name;
      j.shape = src.default_shapes.at(0);
      j.source = src.source;
      j.config = config;
      j.timeout_ms = 600'000;  // a loaded 2-core host: compile time is not what this test is about
      const uint64_t window = shared_section_bytes(sections_of(j), src.entry);
      const uint64_t bytes = window > reserved ? window - reserved : 0;
      EXPECT_LE(bytes, k->cuda_static_shared_bytes)
          << k->name << " " << dtype_name(d) << " " << config_string(config)
          << ": raise KernelSpec::cuda_static_shared_bytes in kernels/" << k->name << "/spec.cc";
      most = std::max(most, bytes);
    }
    EXPECT_EQ(most > 0, k->cuda_static_shared_bytes > 0)
        << k->name << ": its bound is " << k->cuda_static_shared_bytes << " B and its starter has " << most
        << " B of static shared memory";
  }
}

// The triton starters build through compile.py (no GPU needed): a cubin with its launch
// metadata, and the build that assumes the type's divisible parameters 16-divisible.
TEST_F(CompilerTest, TritonStartersBuildACubinWithMetadataAndADivisibleVariant) {
  int types = 0;
  for (const kernels::KernelSpec* k : kernels::all()) {
    auto src = k->backends.find(Backend::kTriton);
    if (src == k->backends.end()) continue;
    ++types;
    for (DType d : k->dtypes) {
      JobSpec j = job(Backend::kTriton, d);
      j.kernel_type = k->name;
      j.shape = src->second.default_shapes.at(0);
      j.source = src->second.source;
      j.config = kernels::default_config(src->second, d);
      auto art = compiler_->compile(j, gpu_caps("sm_90a"));
      ASSERT_TRUE(art.ok()) << k->name << " " << dtype_name(d) << ": " << art.status().to_string();
      EXPECT_FALSE(art->cache_hit);
      EXPECT_EQ(art->entry, src->second.entry);
      ASSERT_EQ(read(art->path).substr(0, 4), std::string("\x7f" "ELF"));
      const std::string stem = art->path.substr(0, art->path.size() - std::string(".cubin").size());
      auto meta = nlohmann::json::parse(read(stem + ".json"));
      EXPECT_EQ(meta.at("name"), src->second.entry);
      EXPECT_EQ(meta.at("block").at(0).get<int>(), 32 * int(j.config.at("AK_NUM_WARPS")));
      EXPECT_EQ(meta.at("divisible_by_16").size(), 0u);
      auto div = nlohmann::json::parse(read(stem + ".div16.json"));
      const auto named = div.at("divisible_by_16").get<std::set<std::string>>();
      EXPECT_EQ(named, std::set<std::string>(k->triton_divisible.begin(), k->triton_divisible.end()));
      EXPECT_EQ(read(stem + ".div16.cubin").substr(0, 4), std::string("\x7f" "ELF"));
      auto again = compiler_->compile(j, gpu_caps("sm_90a"));
      ASSERT_TRUE(again.ok());
      EXPECT_TRUE(again->cache_hit);
    }
  }
  EXPECT_GE(types, 3) << "softmax, layernorm and matmul have triton sources";
}

TEST_F(CompilerTest, TritonCompileErrorIsInvalidArgumentWithTritonsMessage) {
  JobSpec j = job(Backend::kTriton, DType::kF16);
  j.config = kernels::default_config(kernels::find("softmax")->backends.at(Backend::kTriton).space);
  j.source = "import triton\nimport triton.language as tl\n\n@triton.jit\ndef softmax_kernel(x_ptr, y_ptr, rows, cols, BLOCK: tl.constexpr):\n    tl.store(y_ptr, undefined_name)\n";
  auto art = compiler_->compile(j, gpu_caps("sm_90a"));
  ASSERT_FALSE(art.ok());
  EXPECT_EQ(art.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(art.status().message().find("undefined_name"), std::string::npos) << art.status().message();
}

TEST_F(CompilerTest, HopperSm90IsCompiledAsSm90aAndOtherArchsAsGiven) {
  auto a = compiler_->compile(job(Backend::kCuda), gpu_caps("sm_90"));
  auto b = compiler_->compile(job(Backend::kCuda), gpu_caps("sm_90a"));
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().to_string() << b.status().to_string();
  EXPECT_EQ(a->path, b->path);
  EXPECT_TRUE(b->cache_hit);
  auto c = compiler_->compile(job(Backend::kCuda, DType::kBF16), gpu_caps("sm_80"));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_NE(c->options_hash, b->options_hash);
  Capabilities cc;
  cc.compute_capability = "8.9";
  auto d = compiler_->compile(job(Backend::kCuda, DType::kF16), cc);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
}

// A failed NVRTC compile is kInvalidArgument with the log of the candidate's own source: the front
// end's error, the source's #error, and the PTX assembler's messages (a configuration that needed
// more registers than its launch bounds allow failed with an empty "nvrtc failed
// (NVRTC_ERROR_COMPILATION) ... :" on an H100, the ptxas lines withheld as if they were an
// included file's diagnostics).
TEST_F(CompilerTest, NvrtcErrorIsInvalidArgumentWithTheLog) {
  auto reason = [&](const JobSpec& j) {
    auto art = compiler_->compile(j, gpu_caps("sm_90a"));
    EXPECT_FALSE(art.ok());
    if (art.ok()) return std::string();
    EXPECT_EQ(art.status().code(), StatusCode::kInvalidArgument);
    return art.status().message();
  };
  JobSpec j = job(Backend::kCuda);
  j.source = "extern \"C\" __global__ void ak_softmax(float* y) { y[0] = not_declared_here; }\n";
  std::string why = reason(j);
  EXPECT_NE(why.find("not_declared_here"), std::string::npos) << why;

  j = job(Backend::kCuda);
  j.config["AK_VEC"] = 3;  // the source's #error
  why = reason(j);
  EXPECT_NE(why.find("AK_VEC must be"), std::string::npos) << why;

  j = job(Backend::kCuda);
  j.source = "extern \"C\" __global__ void ak_softmax(float* y) { asm volatile(\"bogus.op.b32 %0;\" :: \"r\"(1)); }\n";
  why = reason(j);
  for (const char* line : {"ptxas application ptx input, line ", "Not a name of any known instruction: 'bogus'",
                           "ptxas fatal   : Ptx assembly aborted due to errors"})
    EXPECT_NE(why.find(line), std::string::npos) << why;
}

TEST_F(CompilerTest, CudaNeedsAnArchitectureAndReservesAkDtype) {
  auto art = compiler_->compile(job(Backend::kCuda), gpu_caps(""));
  EXPECT_EQ(art.status().code(), StatusCode::kInvalidArgument);
  art = compiler_->compile(job(Backend::kCuda), gpu_caps("x86_64"));
  EXPECT_EQ(art.status().code(), StatusCode::kInvalidArgument);
  JobSpec j = job(Backend::kCuda);
  j.config["AK_DTYPE"] = 1;
  EXPECT_EQ(compiler_->compile(j, gpu_caps("sm_90a")).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(CompilerTest, CudaToolkitHeadersAreOnTheIncludePath) {
  JobSpec j = job(Backend::kCuda, DType::kF16);
  j.source = "#include <cuda_fp16.h>\n"
             "extern \"C\" __global__ void ak_softmax(const __half* x, __half* y) { y[0] = __hadd(x[0], x[1]); }\n";
  auto art = compiler_->compile(j, gpu_caps("sm_90a"));
  ASSERT_TRUE(art.ok()) << art.status().to_string();
}

}  // namespace
}  // namespace ak

namespace ak {
namespace {

namespace fs = std::filesystem;

// What the hostile drills of issue 19 did to the compile step: read a host file through #include,
// compile for minutes against a short timeout, replace a cached artefact.
class HostileCompileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "ak-hostile-compile-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    o_.cache_dir = (dir_ / "cache").string();
    o_.python = AK_PYTHON;
    // A file of the host that the candidate must not see, with a recognisable text.
    secret_ = (dir_ / "secret.txt").string();
    std::ofstream(secret_) << "top_secret_token_4711 = 1;\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  JobSpec cpu_job(const std::string& source, int64_t timeout_ms = 60'000) const {
    JobSpec j;
    j.job_id = "hostile";
    j.kernel_type = "softmax";
    j.requires_.backend = Backend::kCpu;
    j.dtype = DType::kF32;
    j.shape = {64, 1024};
    j.source = source;
    j.timeout_ms = timeout_ms;
    return j;
  }
  static Capabilities cpu_caps() {
    Capabilities c;
    c.arch = "x86_64";
    return c;
  }

  fs::path dir_;
  std::string secret_;
  CompilerOptions o_;
};

TEST_F(HostileCompileTest, AnAbsoluteOrClimbingIncludeIsRefusedWithoutTheFilesText) {
  auto compiler = make_compiler(o_);
  for (const std::string& include : {"#include \"" + secret_ + "\"", std::string("#include \"../../etc/passwd\""),
                                     "  #  include <" + secret_ + ">"}) {
    auto art = compiler->compile(cpu_job(include + "\nextern \"C\" int ak_softmax_cpu() { return 0; }\n"), cpu_caps());
    ASSERT_FALSE(art.ok()) << include;
    EXPECT_EQ(art.status().code(), StatusCode::kInvalidArgument) << include;
    EXPECT_NE(art.status().message().find("line 1: #include of an absolute path or one with '..' is refused"),
              std::string::npos)
        << art.status().message();
    EXPECT_EQ(art.status().message().find("top_secret_token_4711"), std::string::npos);
  }
}

TEST_F(HostileCompileTest, AnIncludeHiddenBehindAMacroFailsWithItsDiagnosticsWithheld) {
  auto compiler = make_compiler(o_);
  const std::string source =
      "#define SECRET \"" + secret_ + "\"\n#include SECRET\nextern \"C\" int f() { return 0; }\n";
  auto art = compiler->compile(cpu_job(source), cpu_caps());
  ASSERT_FALSE(art.ok());
  EXPECT_EQ(art.status().code(), StatusCode::kInvalidArgument);
  // The compiler complains about the secret's text; none of it reaches the reason.
  EXPECT_EQ(art.status().message().find("top_secret_token_4711"), std::string::npos) << art.status().message();
  EXPECT_NE(art.status().message().find("withheld"), std::string::npos) << art.status().message();
}

// The PTX assembler's lines reach the reason (NvrtcErrorIsInvalidArgumentWithTheLog); a host file
// written to look like them, pulled in behind a macro, still does not: NVRTC's diagnostics about it
// are located in that file, and the source lines it quotes are indented.
TEST_F(HostileCompileTest, AHostFileThatLooksLikeAssemblerMessagesStaysWithheld) {
  auto compiler = make_compiler(o_);
  const std::string fake = (dir_ / "fake.h").string();
  std::ofstream(fake) << "ptxas fatal   : top_secret_token_4711\n"
                         "ptxas application ptx input, line 1; error   : top_secret_token_4711\n";
  JobSpec j = cpu_job("");
  j.requires_.backend = Backend::kCuda;
  j.source = "#define SECRET \"" + fake + "\"\n#include SECRET\nextern \"C\" __global__ void ak_softmax() {}\n";
  Capabilities caps;
  caps.arch = "sm_90a";
  auto art = compiler->compile(j, caps);
  ASSERT_FALSE(art.ok());
  EXPECT_EQ(art.status().code(), StatusCode::kInvalidArgument) << art.status().message();
  EXPECT_EQ(art.status().message().find("top_secret_token_4711"), std::string::npos) << art.status().message();
  EXPECT_NE(art.status().message().find("withheld"), std::string::npos) << art.status().message();
}

TEST_F(HostileCompileTest, ACompileBombEndsAtTheJobsTimeoutAsTimedOut) {
  auto compiler = make_compiler(o_);
  // About 10^10 constant-evaluation steps: minutes of compiler time.
  const std::string bomb =
      "constexpr long spin() { long s = 0; for (long i = 0; i < 100000; ++i) for (long j = 0; j < 100000; ++j) "
      "s += i ^ j; return s; }\nconstexpr long value = spin();\n"
      "extern \"C\" int ak_softmax_cpu(const void*, void*, long, long, int) { return int(value & 1); }\n";
  const auto t0 = std::chrono::steady_clock::now();
  auto art = compiler->compile(cpu_job(bomb, 2'000), cpu_caps());
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(art.ok());
  EXPECT_EQ(art.status().code(), StatusCode::kTimedOut) << art.status().message();
  EXPECT_LT(elapsed, std::chrono::seconds(30)) << "the compiler was not stopped at the job's timeout";
}

TEST_F(HostileCompileTest, AnNvrtcCompileBombEndsAtTheJobsTimeoutAsTimedOut) {
  auto compiler = make_compiler(o_);
  JobSpec j = cpu_job("", 2'000);
  j.requires_.backend = Backend::kCuda;
  // NVRTC caps the steps of one constant evaluation, not their number: 65,536 template
  // instantiations of 200,000 steps each (64 of them take NVRTC about 2 s): most of an hour.
  j.source =
      "constexpr long spin(long k) { long s = 0; for (long i = 0; i < 200000; ++i) s += i ^ k; return s; }\n"
      "template <long Lo, long Hi, bool Leaf = (Hi - Lo == 1)> struct R {\n"
      "  static constexpr long v = R<Lo, (Lo + Hi) / 2>::v + R<(Lo + Hi) / 2, Hi>::v; };\n"
      "template <long Lo, long Hi> struct R<Lo, Hi, true> { static constexpr long v = spin(Lo); };\n"
      "constexpr long value = R<0, 65536>::v;\n"
      "extern \"C\" __global__ void ak_softmax(float* y) { y[0] = float(value & 1); }\n";
  Capabilities caps;
  caps.arch = "sm_90a";
  const auto t0 = std::chrono::steady_clock::now();
  auto art = compiler->compile(j, caps);
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(art.ok());
  EXPECT_EQ(art.status().code(), StatusCode::kTimedOut) << art.status().message();
  EXPECT_LT(elapsed, std::chrono::seconds(30)) << "NVRTC was not stopped at the job's timeout";
  // The compiler is not worn out by it: an honest candidate builds next.
  j = cpu_job("", 60'000);
  j.requires_.backend = Backend::kCuda;
  j.source = kernels::find("softmax")->backends.at(Backend::kCuda).source;
  j.config = kernels::default_config(kernels::find("softmax")->backends.at(Backend::kCuda).space);
  auto honest = compiler->compile(j, caps);
  EXPECT_TRUE(honest.ok()) << honest.status().to_string();
}

TEST_F(HostileCompileTest, AConfinedNvrtcCompileBuildsAndCannotReadAHostFile) {
  auto policy = make_confinement_policy(false, {o_.cache_dir});
  if (!policy.ok()) GTEST_SKIP() << "no confinement here: " << policy.status().message();
  chmod(secret_.c_str(), 0600);
  o_.confinement = *policy;
  auto compiler = make_compiler(o_);
  Capabilities caps;
  caps.arch = "sm_90a";
  JobSpec j = cpu_job("");
  j.requires_.backend = Backend::kCuda;
  j.source = kernels::find("softmax")->backends.at(Backend::kCuda).source;
  j.config = kernels::default_config(kernels::find("softmax")->backends.at(Backend::kCuda).space);
  auto honest = compiler->compile(j, caps);
  ASSERT_TRUE(honest.ok()) << honest.status().to_string();
  EXPECT_FALSE(honest->cache_hit);
  // An include path handed in through a macro slips past the include check; confined, NVRTC
  // cannot open the file (it runs as another user), and nothing of it reaches the reason.
  j.source = "#define SECRET \"" + secret_ + "\"\n#include SECRET\nextern \"C\" __global__ void ak_softmax() {}\n";
  auto art = compiler->compile(j, caps);
  ASSERT_FALSE(art.ok());
  EXPECT_EQ(art.status().code(), StatusCode::kInvalidArgument) << art.status().message();
  EXPECT_EQ(art.status().message().find("top_secret_token_4711"), std::string::npos) << art.status().message();
}

TEST_F(HostileCompileTest, ATamperedCacheEntryIsAMissAndIsBuiltAgain) {
  auto compiler = make_compiler(o_);
  const std::string source = kernels::find("softmax")->backends.at(Backend::kCpu).source;
  auto a = compiler->compile(cpu_job(source), cpu_caps());
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  const std::string original = [&] {
    std::ifstream in(a->path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }();
  std::ofstream(a->path, std::ios::binary | std::ios::trunc) << "a replaced binary";
  auto b = compiler->compile(cpu_job(source), cpu_caps());
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_FALSE(b->cache_hit);
  std::ifstream in(b->path, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()), original);
  auto c = compiler->compile(cpu_job(source), cpu_caps());
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->cache_hit);
}

TEST_F(HostileCompileTest, AConfinedCompileCannotEmbedAHostFileThatTheIncludeCheckDoesNotSee) {
  auto policy = make_confinement_policy(false, {o_.cache_dir});
  if (!policy.ok()) GTEST_SKIP() << "no confinement here: " << policy.status().message();
  chmod(secret_.c_str(), 0600);
  // The assembler's .incbin reads a file at compile time; no #include names it.
  const std::string source = "asm(\".section .rodata\\n.incbin \\\"" + secret_ +
                             "\\\"\\n.previous\");\n"
                             "extern \"C\" int ak_softmax_cpu(const void*, void*, long, long, int) { return 0; }\n";
  auto contains_secret = [](const Result<CompiledArtifact>& art) {
    if (!art.ok()) return art.status().message().find("top_secret_token_4711") != std::string::npos;
    std::ifstream in(art->path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>())
               .find("top_secret_token_4711") != std::string::npos;
  };
  // Unconfined, the artefact carries the file: the drill works.
  auto open_compiler = make_compiler(o_);
  EXPECT_TRUE(contains_secret(open_compiler->compile(cpu_job(source), cpu_caps())));
  fs::remove_all(o_.cache_dir);
  o_.confinement = *policy;
  auto confined = make_compiler(o_);
  const auto art = confined->compile(cpu_job(source), cpu_caps());
  EXPECT_FALSE(contains_secret(art)) << (art.ok() ? art->path : art.status().message());
  // An honest candidate still builds.
  auto honest = confined->compile(cpu_job(kernels::find("softmax")->backends.at(Backend::kCpu).source), cpu_caps());
  EXPECT_TRUE(honest.ok()) << honest.status().to_string();
}

TEST_F(HostileCompileTest, AConfinedCompileWithARelativeCacheFolderUnderTmpBuilds) {
  // `autokernel run` in a folder under /tmp gave a relative cache folder, which a confined child
  // resolved inside its read-only, overmounted /tmp: every compile failed.
  const fs::path cwd = fs::current_path();
  fs::current_path(dir_);
  struct Back {
    fs::path p;
    ~Back() { fs::current_path(p); }
  } back{cwd};
  auto policy = make_confinement_policy(false, {(dir_ / "rel-cache").string()});
  if (!policy.ok()) GTEST_SKIP() << "no confinement here: " << policy.status().message();
  CompilerOptions o = o_;
  o.cache_dir = "rel-cache";
  o.confinement = *policy;
  auto compiler = make_compiler(o);
  auto art = compiler->compile(cpu_job(kernels::find("softmax")->backends.at(Backend::kCpu).source), cpu_caps());
  ASSERT_TRUE(art.ok()) << art.status().to_string();
  EXPECT_TRUE(fs::path(art->path).is_absolute()) << art->path;
  EXPECT_TRUE(fs::exists(art->path)) << art->path;
}

}  // namespace
}  // namespace ak
