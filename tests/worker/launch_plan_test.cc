// launch_plan (worker/sandbox/candidate.h), which `autokernel export --hf` writes into a package,
// against what the sandbox's own candidates launch: every cuda kernel type and a Triton kernel
// with its 16-divisible build are loaded through a recording CudaDriver (no GPU), launched on CPU
// tensors, and each recorded launch (grid, block, shared memory, every parameter's value) must be
// the plan's, resolved for those tensors.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/reference.h"
#include "kernels/registry.h"
#include "worker/sandbox/candidate.h"

namespace ak {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Launch {
  uintptr_t fn;
  unsigned grid[3], block[3], shared;
  std::vector<uint64_t> params;
};

// What the recording driver saw; the kernel's parameter count comes from the test (every farm
// parameter is 8 bytes).
std::vector<Launch> g_launches;
size_t g_param_count = 0;

CUresult load_data(CUmodule* m, const void* image) {
  // Fake cubins are "\177ELF" and one byte naming the build: 'A' (plain) or 'B' (aligned).
  *m = reinterpret_cast<CUmodule>(uintptr_t(static_cast<const unsigned char*>(image)[4]));
  return CUDA_SUCCESS;
}
CUresult get_function(CUfunction* f, CUmodule m, const char*) {
  *f = reinterpret_cast<CUfunction>(m);
  return CUDA_SUCCESS;
}
CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                unsigned shared, CUstream, void** args, void**) {
  Launch l{reinterpret_cast<uintptr_t>(f), {gx, gy, gz}, {bx, by, bz}, shared, {}};
  for (size_t i = 0; i < g_param_count; ++i) l.params.push_back(*static_cast<uint64_t*>(args[i]));
  g_launches.push_back(l);
  return CUDA_SUCCESS;
}
CUresult ok_unload(CUmodule) { return CUDA_SUCCESS; }
CUresult ok_set(CUfunction, CUfunction_attribute, int) { return CUDA_SUCCESS; }
CUresult max_threads(int* v, CUfunction_attribute a, CUfunction) {
  *v = a == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024 : 0;  // and no static shared memory
  return CUDA_SUCCESS;
}

CudaDriver recording_driver() {
  CudaDriver d{};
  d.cuModuleLoadData = load_data;
  d.cuModuleGetFunction = get_function;
  d.cuModuleUnload = ok_unload;
  d.cuFuncSetAttribute = ok_set;
  d.cuFuncGetAttribute = max_threads;
  d.cuLaunchKernel = launch;
  return d;
}

void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

// The plan's launches, resolved for these tensors; a workspace parameter is checked apart (the
// candidate owns that buffer): its value in `launches` is kept as recorded.
void expect_plan_matches(const json& plan, const std::vector<at::Tensor>& in, const at::Tensor& out,
                         const std::vector<Launch>& launches, const std::string& what) {
  ASSERT_EQ(plan["launches"].size(), launches.size()) << what;
  for (size_t l = 0; l < launches.size(); ++l) {
    const json& p = plan["launches"][l];
    const Launch& got = launches[l];
    std::vector<uint64_t> want;
    for (const json& prm : p["params"]) {
      const std::string kind = prm[0];
      const uint64_t off = prm[2].get<uint64_t>();
      if (kind == "input") want.push_back(reinterpret_cast<uint64_t>(in.at(prm[1].get<size_t>()).data_ptr()) + off);
      if (kind == "output") want.push_back(reinterpret_cast<uint64_t>(out.data_ptr()) + off);
      if (kind == "workspace") want.push_back(got.params.at(want.size()));  // non-null, checked below
      if (kind == "value") want.push_back(uint64_t(prm[1].get<int64_t>()));
    }
    // The build whose assumptions hold, as the sandbox chooses it.
    json variant = p;
    if (p.contains("aligned")) {
      bool all = true;
      for (const json& i : p["aligned"]["divisible"]) all = all && want.at(i.get<size_t>()) % 16 == 0;
      if (all) variant = p["aligned"];
    }
    const int build = variant["build"].get<int>();
    EXPECT_EQ(got.fn, uintptr_t(build == 0 ? 'A' : 'B')) << what << " launch " << l;
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(got.grid[i], p["grid"][i].get<unsigned>()) << what << " launch " << l;
      EXPECT_EQ(got.block[i], variant["block"][i].get<unsigned>()) << what << " launch " << l;
    }
    EXPECT_EQ(got.shared, variant["shared_bytes"].get<unsigned>()) << what;
    EXPECT_EQ(got.params, want) << what << " launch " << l;
    for (size_t i = 0; i < p["params"].size(); ++i) {
      if (p["params"][i][0] == "workspace") {
        EXPECT_NE(want.at(i), 0u) << what;
      }
    }
  }
}

class LaunchPlan : public ::testing::Test {
 protected:
  // (std::filesystem's remove_all is not used here: the copy libtorch.so exports crashes in it.)
  void SetUp() override {
    char tmpl[] = "/tmp/launch-plan-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    write(dir_ / "k.cubin", std::string("\177ELFA"));
    dev_.drv = &drv_;
    dev_.arch = "sm_90a";
    dev_.max_shared_optin = 227 * 1024;
  }
  void TearDown() override {
    for (const char* f : {"k.cubin", "t.cubin", "t.json", "t.div16.cubin", "t.div16.json"}) unlink((dir_ / f).c_str());
    rmdir(dir_.c_str());
  }

  fs::path dir_;
  CudaDriver drv_ = recording_driver();
  sandbox::CudaDevice dev_;
};

TEST_F(LaunchPlan, EveryCudaKernelTypeLaunchesAsItsPlanSays) {
  int checked = 0;
  for (const kernels::KernelSpec* spec : kernels::all()) {
    auto src = spec->backends.find(Backend::kCuda);
    if (src == spec->backends.end() || spec->edge_shapes.empty()) continue;
    const kernels::TorchHarness* th = kernels::find_harness(spec->name);
    ASSERT_NE(th, nullptr) << spec->name;
    const DType dtype = DType::kBF16;
    const std::vector<int64_t> shape = spec->edge_shapes.back();
    const auto config = kernels::default_config(src->second, dtype);
    const std::string what = spec->name + " " + std::to_string(shape.size()) + "-d";
    const json plan = json::parse(
        sandbox::launch_plan("cuda", (dir_ / "k.cubin").string(), src->second.entry, *spec, config, dtype, shape));
    std::vector<at::Tensor> in = th->make_inputs(shape, dtype, c10::Device(c10::kCPU), 1);
    at::Tensor out = th->make_output(in);
    ASSERT_EQ(plan["inputs"].size(), in.size()) << what;
    for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(plan["inputs"][i]["sizes"], json(in[i].sizes().vec())) << what;
    EXPECT_EQ(plan["output"]["sizes"], json(out.sizes().vec())) << what;
    g_param_count = plan["launches"][0]["params"].size();
    g_launches.clear();
    auto cand =
        sandbox::load_cuda_candidate(dev_, (dir_ / "k.cubin").string(), src->second.entry, *spec, config, dtype);
    cand->launch(in, out, shape);
    expect_plan_matches(plan, in, out, g_launches, what);
    if (spec->name == "fused_mlp") {
      EXPECT_EQ(plan["launches"].size(), size_t(spec->cuda_phases)) << "one launch per phase";
      EXPECT_GT(plan["workspace_bytes"].get<int64_t>(), 0);
    }
    ++checked;
  }
  EXPECT_GE(checked, 10) << "every cuda kernel type";
}

TEST_F(LaunchPlan, ATritonKernelRunsItsAlignedBuildOnlyWhereTheValuesAllowIt) {
  const kernels::KernelSpec* spec = kernels::find("softmax");
  ASSERT_NE(spec, nullptr);
  // Metadata as worker/triton/compile.py writes it: x_ptr, y_ptr, rows, cols and two hidden
  // scratch pointers; the aligned build assumes x_ptr, y_ptr and cols 16-divisible.
  const json params = json::array({{{"name", "x_ptr"}, {"kind", "pointer"}, {"bytes", 8}},
                                   {{"name", "y_ptr"}, {"kind", "pointer"}, {"bytes", 8}},
                                   {{"name", "rows"}, {"kind", "scalar"}, {"bytes", 8}},
                                   {{"name", "cols"}, {"kind", "scalar"}, {"bytes", 8}},
                                   {{"name", "global_scratch"}, {"kind", "global_scratch"}, {"bytes", 8}},
                                   {{"name", "profile_scratch"}, {"kind", "profile_scratch"}, {"bytes", 8}}});
  write(dir_ / "t.cubin", std::string("\177ELFA"));
  write(dir_ / "t.json",
        json{{"name", "softmax_kernel"}, {"block", {128, 1, 1}}, {"shared_bytes", 0}, {"params", params}}.dump());
  write(dir_ / "t.div16.cubin", std::string("\177ELFB"));
  write(dir_ / "t.div16.json", json{{"name", "softmax_kernel"},
                                    {"block", {256, 1, 1}},
                                    {"shared_bytes", 64},
                                    {"params", params},
                                    {"divisible_by_16", {"x_ptr", "y_ptr", "cols"}}}
                                   .dump());
  const std::map<std::string, int64_t> config = {{"BLOCK", 1024}, {"AK_NUM_WARPS", 4}, {"AK_NUM_STAGES", 1}};
  const kernels::TorchHarness* th = kernels::find_harness("softmax");
  for (int64_t cols : {1024, 1000}) {  // cols 1000 is no multiple of 16: the plain build
    const std::vector<int64_t> shape = {8, cols};
    const json plan =
        json::parse(sandbox::launch_plan("triton", (dir_ / "t.cubin").string(), "", *spec, config, DType::kF16, shape));
    ASSERT_TRUE(plan["launches"][0].contains("aligned"));
    EXPECT_EQ(plan["launches"][0]["aligned"]["divisible"], json({0, 1, 3}));
    std::vector<at::Tensor> in = th->make_inputs(shape, DType::kF16, c10::Device(c10::kCPU), 1);
    at::Tensor out = th->make_output(in);
    for (const bool offset : {false, true}) {
      // At an offset of one element, x_ptr is no multiple of 16: the plain build.
      std::vector<at::Tensor> args = in;
      if (offset)
        args[0] = at::empty({shape[0] * shape[1] + 1}, in[0].options())
                      .narrow(0, 1, shape[0] * shape[1])
                      .view({shape[0], shape[1]});
      g_param_count = 6;
      g_launches.clear();
      auto cand = sandbox::load_triton_candidate(dev_, (dir_ / "t.cubin").string(), *spec, config, DType::kF16);
      cand->launch(args, out, shape);
      expect_plan_matches(plan, args, out, g_launches, "softmax triton cols " + std::to_string(cols));
      ASSERT_EQ(g_launches.size(), 1u);
      EXPECT_EQ(g_launches[0].fn, uintptr_t(cols % 16 == 0 && !offset ? 'B' : 'A'));
      EXPECT_EQ(g_launches[0].params[4], 0u) << "hidden scratch pointers are null";
    }
  }
}

}  // namespace
}  // namespace ak
