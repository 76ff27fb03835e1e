// Where a cuda candidate's TMA tensor maps go (worker/sandbox/candidate.cc, TensorMaps): through a
// recording CudaDriver on CPU tensors, which slot each call's maps are written to, by a host copy
// (the sandbox) or by the writer kernel (the torch library), and what a call on a stream that a
// CUDA graph captures writes. And the writer's PTX, assembled by ptxas where the toolkit has it.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/reference.h"
#include "kernels/registry.h"
#include "worker/sandbox/candidate.h"

namespace ak {
namespace {

constexpr CUdeviceptr kBase = 0x7000000;  // the module's ak_tensor_maps, as the fake driver reports it
constexpr uintptr_t kWriter = 0x5151;     // the writer kernel's handle

// One write of a slot: its slot index and the key it holds (the image's last 64 bytes).
struct Write {
  bool by_writer;
  size_t slot;
  std::array<uint64_t, 8> key;
};

std::vector<Write> g_writes;
int g_kernel_launches = 0;
bool g_capturing = false;
size_t g_slot_bytes = 0;

Write write_of(CUdeviceptr dst, const unsigned char* image, bool by_writer) {
  Write w{by_writer, size_t((dst - kBase) / g_slot_bytes), {}};
  std::memcpy(w.key.data(), image + g_slot_bytes - 64, 64);
  return w;
}

CUresult load_data(CUmodule* m, const void*) {
  *m = reinterpret_cast<CUmodule>(uintptr_t(1));
  return CUDA_SUCCESS;
}
CUresult get_function(CUfunction* f, CUmodule, const char*) {
  *f = reinterpret_cast<CUfunction>(uintptr_t(2));
  return CUDA_SUCCESS;
}
CUresult get_global(CUdeviceptr* p, size_t* bytes, CUmodule, const char* name) {
  if (std::string(name) != kernels::kTensorMapSymbol) return CUresult(500);
  *p = kBase;
  *bytes = kernels::kTensorMapSlots * g_slot_bytes;
  return CUDA_SUCCESS;
}
CUresult encode(void* map, int, unsigned, void*, const uint64_t*, const uint64_t*, const uint32_t*, const uint32_t*,
                int, int, int, int) {
  std::memset(map, 0xAB, 128);
  return CUDA_SUCCESS;
}
CUresult copy(CUdeviceptr dst, const void* src, size_t bytes, CUstream) {
  EXPECT_EQ(bytes, g_slot_bytes);
  g_writes.push_back(write_of(dst, static_cast<const unsigned char*>(src), false));
  return CUDA_SUCCESS;
}
CUresult launch(CUfunction f, unsigned, unsigned, unsigned, unsigned bx, unsigned, unsigned, unsigned, CUstream,
                void** args, void**) {
  if (reinterpret_cast<uintptr_t>(f) != kWriter) {
    ++g_kernel_launches;
    return CUDA_SUCCESS;
  }
  EXPECT_EQ(bx, 1u);
  EXPECT_EQ(*static_cast<unsigned*>(args[2]), unsigned(g_slot_bytes / 8)) << "words";
  g_writes.push_back(write_of(*static_cast<CUdeviceptr*>(args[1]), static_cast<unsigned char*>(args[0]), true));
  return CUDA_SUCCESS;
}
CUresult capturing(CUstream, CUstreamCaptureStatus* s) {
  *s = g_capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
CUresult ok_unload(CUmodule) { return CUDA_SUCCESS; }
CUresult ok_set(CUfunction, CUfunction_attribute, int) { return CUDA_SUCCESS; }
CUresult attribute(int* v, CUfunction_attribute a, CUfunction) {
  *v = a == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024 : 0;
  return CUDA_SUCCESS;
}

CudaDriver recording_driver() {
  CudaDriver d{};
  d.cuModuleLoadData = load_data;
  d.cuModuleGetFunction = get_function;
  d.cuModuleGetGlobal = get_global;
  d.cuModuleUnload = ok_unload;
  d.cuFuncSetAttribute = ok_set;
  d.cuFuncGetAttribute = attribute;
  d.cuLaunchKernel = launch;
  d.cuTensorMapEncodeTiled = encode;
  d.cuMemcpyHtoDAsync = copy;
  d.cuStreamIsCapturing = capturing;
  return d;
}

class TensorMaps : public ::testing::Test {
 protected:
  void SetUp() override {
    g_writes.clear();
    g_kernel_launches = 0;
    g_capturing = false;
    char tmpl[] = "/tmp/tensor-maps-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ + "/k.cubin", std::ios::binary) << std::string("\177ELFA");
    dev_.drv = &drv_;
    dev_.arch = "sm_90a";
    dev_.max_shared_optin = 227 * 1024;
  }
  void TearDown() override {
    unlink((dir_ + "/k.cubin").c_str());
    rmdir(dir_.c_str());
  }

  // A candidate of `type` with its TMA configuration, and `sets` input sets of `shape`.
  std::unique_ptr<sandbox::Candidate> load(const std::string& type, const std::map<std::string, int64_t>& config) {
    const kernels::KernelSpec* spec = kernels::find(type);
    EXPECT_NE(spec, nullptr);
    const std::vector<int64_t> shape = spec->backends.at(Backend::kCuda).default_shapes.front();
    size_t maps = 0;
    for (const auto& g : kernels::tensor_map_groups(*spec, config, shape, DType::kBF16))
      maps = std::max(maps, g.maps.size());
    EXPECT_GT(maps, 0u) << type << ": the configuration reads no maps";
    g_slot_bytes = kernels::tensor_map_slot_bytes(maps);
    return sandbox::load_cuda_candidate(dev_, dir_ + "/k.cubin", spec->backends.at(Backend::kCuda).entry, *spec, config,
                                        DType::kBF16);
  }
  struct Call {
    std::vector<at::Tensor> in;
    at::Tensor out;
  };
  static Call inputs(const std::string& type, const std::vector<int64_t>& shape, uint64_t seed) {
    const kernels::TorchHarness* th = kernels::find_harness(type);
    Call c;
    c.in = th->make_inputs(shape, DType::kBF16, c10::Device(c10::kCPU), seed);
    c.out = th->make_output(c.in);
    return c;
  }
  static uint64_t address(const at::Tensor& t) { return reinterpret_cast<uint64_t>(t.data_ptr()); }

  std::string dir_;
  CudaDriver drv_ = recording_driver();
  sandbox::CudaDevice dev_;
};

const std::map<std::string, int64_t> kMatmulTma = {{"AK_WGMMA", 2},  {"AK_BK", 64},    {"AK_BM", 128},
                                                   {"AK_BN", 128},   {"AK_STAGES", 4}, {"AK_WARPS_M", 2},
                                                   {"AK_WARPS_N", 4}};
const std::vector<int64_t> kMatmulShape = {256, 256, 256};

TEST_F(TensorMaps, TheSandboxCopiesEachNewKeysMapsOnceAndACapturingStreamGetsNone) {
  auto cand = load("matmul", kMatmulTma);
  Call a = inputs("matmul", kMatmulShape, 1), b = inputs("matmul", kMatmulShape, 2);
  cand->launch(a.in, a.out, kMatmulShape);
  cand->launch(a.in, a.out, kMatmulShape);
  cand->launch(b.in, b.out, kMatmulShape);
  ASSERT_EQ(g_writes.size(), 2u) << "one copy per new key";
  EXPECT_FALSE(g_writes[0].by_writer);
  EXPECT_EQ(g_writes[0].slot, 0u);
  EXPECT_EQ(g_writes[1].slot, 1u);
  EXPECT_EQ(g_writes[0].key[0], address(a.in[0]));
  EXPECT_EQ(g_writes[0].key[1], address(a.in[1]));
  EXPECT_EQ(g_writes[0].key[2], 256u) << "then the shape";
  // A host copy cannot be captured: the kernel launches without maps, nothing is written.
  g_capturing = true;
  Call c = inputs("matmul", kMatmulShape, 3);
  cand->launch(c.in, c.out, kMatmulShape);
  EXPECT_EQ(g_writes.size(), 2u);
  EXPECT_EQ(g_kernel_launches, 4);
}

TEST_F(TensorMaps, WithAWriterACapturedCallWritesItsSlotEveryTimeAndEagerCallsKeepToTheOthers) {
  dev_.map_writer = reinterpret_cast<CUfunction>(kWriter);
  auto cand = load("matmul", kMatmulTma);
  Call a = inputs("matmul", kMatmulShape, 1);
  cand->launch(a.in, a.out, kMatmulShape);
  ASSERT_EQ(g_writes.size(), 1u);
  EXPECT_TRUE(g_writes[0].by_writer);
  EXPECT_EQ(g_writes[0].slot, 0u);
  // Captured: written each time (the graph replays the write before the kernel), into the last slot.
  g_capturing = true;
  Call g = inputs("matmul", kMatmulShape, 2);
  cand->launch(g.in, g.out, kMatmulShape);
  cand->launch(g.in, g.out, kMatmulShape);
  cand->launch(a.in, a.out, kMatmulShape);  // even a key an eager slot holds
  ASSERT_EQ(g_writes.size(), 4u);
  for (size_t i = 1; i < 4; ++i) EXPECT_EQ(g_writes[i].slot, size_t(kernels::kTensorMapSlots - 1)) << i;
  EXPECT_EQ(g_writes[1].key[0], address(g.in[0]));
  EXPECT_EQ(g_writes[3].key[0], address(a.in[0]));
  // Eager again: the key written before is still known; new keys go round-robin over the slots
  // before the captured one, never into it.
  g_capturing = false;
  cand->launch(a.in, a.out, kMatmulShape);
  EXPECT_EQ(g_writes.size(), 4u);
  std::vector<Call> keep;
  for (int i = 0; i < 2 * kernels::kTensorMapSlots; ++i) {
    keep.push_back(inputs("matmul", kMatmulShape, 10 + uint64_t(i)));
    cand->launch(keep.back().in, keep.back().out, kMatmulShape);
  }
  ASSERT_EQ(g_writes.size(), size_t(4 + 2 * kernels::kTensorMapSlots));
  for (size_t i = 4; i < g_writes.size(); ++i) {
    EXPECT_LT(g_writes[i].slot, size_t(kernels::kTensorMapSlots - 1)) << i;
    EXPECT_EQ(g_writes[i].slot, (i - 4 + 1) % size_t(kernels::kTensorMapSlots - 1)) << "round-robin after slot 0";
  }
}

TEST_F(TensorMaps, ACapturedMultiPhaseCallWritesEachPhasesMapsIntoASlotOfItsOwn) {
  dev_.map_writer = reinterpret_cast<CUfunction>(kWriter);
  const kernels::KernelSpec* spec = kernels::find("fused_mlp");
  ASSERT_NE(spec, nullptr);
  std::map<std::string, int64_t> config = kMatmulTma;
  auto cand = load("fused_mlp", config);
  const std::vector<int64_t> shape = {256, 256, 512};
  const size_t groups = kernels::tensor_map_groups(*spec, config, shape, DType::kBF16).size();
  ASSERT_GE(groups, 2u);
  g_capturing = true;
  Call c = inputs("fused_mlp", shape, 1);
  cand->launch(c.in, c.out, shape);
  ASSERT_EQ(g_writes.size(), groups);
  for (size_t i = 0; i < groups; ++i) EXPECT_EQ(g_writes[i].slot, kernels::kTensorMapSlots - groups + i) << i;
  EXPECT_EQ(g_kernel_launches, spec->cuda_phases);
  // The eager calls after it never touch those slots.
  g_capturing = false;
  std::vector<Call> keep;
  for (int i = 0; i < kernels::kTensorMapSlots; ++i) {
    keep.push_back(inputs("fused_mlp", shape, 10 + uint64_t(i)));
    cand->launch(keep.back().in, keep.back().out, shape);
  }
  for (size_t i = groups; i < g_writes.size(); ++i) EXPECT_LT(g_writes[i].slot, kernels::kTensorMapSlots - groups) << i;
}

// The writer's PTX assembles for sm_90 (ptxas from the toolkit; skipped where there is none).
TEST(TensorMapWriter, ItsPtxAssemblesForSm90) {
  std::string ptxas;
  for (const char* p : {"/usr/local/cuda/bin/ptxas", "/usr/bin/ptxas"})
    if (access(p, X_OK) == 0) ptxas = p;
  if (ptxas.empty()) GTEST_SKIP() << "no ptxas here";
  char tmpl[] = "/tmp/map-writer-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::ofstream(dir + "/w.ptx") << sandbox::tensor_map_writer_ptx();
  const std::string cmd = ptxas + " -arch=sm_90 " + dir + "/w.ptx -o " + dir + "/w.cubin 2> " + dir + "/log";
  const int rc = std::system(cmd.c_str());
  std::ifstream log(dir + "/log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << text;
  EXPECT_NE(sandbox::tensor_map_writer_ptx().find(sandbox::kTensorMapWriterEntry), std::string::npos);
  for (const char* f : {"/w.ptx", "/w.cubin", "/log"}) unlink((dir + f).c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace ak
