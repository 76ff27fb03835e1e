#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <stdexcept>

#include "kernels/registry.h"

namespace ak::kernels {
namespace {

TEST(KernelsRegistry, FindsEveryKernelTypeAndNothingUnknown) {
  for (const char* name :
       {"softmax", "reduce", "reduce_max", "rmsnorm", "rmsnorm_e5", "layernorm", "layernorm_e12", "layernorm_e6",
        "cross_entropy", "rotary_embedding", "matmul", "flash_attention", "flash_attention_causal", "fused_mlp"}) {
    ASSERT_NE(find(name), nullptr) << name;
    EXPECT_EQ(find(name)->name, name);
  }
  EXPECT_EQ(find("no-such-kernel"), nullptr);
  ASSERT_EQ(all().size(), 14u);
  EXPECT_EQ(all()[0], find("softmax"));
}

TEST(KernelsRegistry, ReduceMaxIsTheReduceSourceWithItsOpDefined) {
  const KernelSpec* sum = find("reduce");
  const KernelSpec* max = find("reduce_max");
  for (Backend b : {Backend::kCpu, Backend::kCuda}) {
    const std::string& s = sum->backends.at(b).source;
    const std::string& m = max->backends.at(b).source;
    EXPECT_EQ(m, "#define AK_REDUCE_MAX 1\n" + s);
  }
  EXPECT_EQ(max->tolerance.at(DType::kF16).atol, 0);
  EXPECT_GT(sum->tolerance.at(DType::kF32).atol, 0);
}

// A norm at another eps is its type's sources with the eps literal replaced, and nothing else.
TEST(KernelsRegistry, ANormOfAnotherEpsIsItsTypesSourceWithTheEpsReplaced) {
  struct Case {
    const char *base, *name, *from, *to;
  };
  for (const Case& c :
       {Case{"rmsnorm", "rmsnorm_e5", "1e-6", "1e-5"}, Case{"layernorm", "layernorm_e12", "1e-5", "1e-12"},
        Case{"layernorm", "layernorm_e6", "1e-5", "1e-6"}}) {
    SCOPED_TRACE(c.name);
    const KernelSpec* base = find(c.base);
    const KernelSpec* k = find(c.name);
    ASSERT_NE(k, nullptr);
    ASSERT_EQ(k->backends.size(), 3u) << "cpu, cuda and triton, as its base type";
    for (const auto& [backend, src] : k->backends) {
      // The line that computes with the eps, in each backend's own spelling.
      const std::string family = c.base;
      const std::string to = c.to;
      const std::string line =
          backend == Backend::kCuda
              ? "#define " + std::string(family == "rmsnorm" ? "AK_RMS_EPS " : "AK_LN_EPS ") + to + "f"
          : backend == Backend::kCpu ? "constexpr double kEps = " + to + ";"
                                     : "/ cols + " + to + ")";
      EXPECT_NE(src.source.find(line), std::string::npos)
          << "no '" << line << "' in the " << backend_name(backend) << " source";
      EXPECT_EQ(src.source.find(c.from), std::string::npos) << "the base eps is gone, comments included";
      // Nothing else changed: every other character is the base's.
      const std::string& was = base->backends.at(backend).source;
      const auto count = [](const std::string& s, const std::string& x) {
        size_t n = 0;
        for (size_t at = s.find(x); at != std::string::npos; at = s.find(x, at + 1)) ++n;
        return n;
      };
      const size_t n = count(was, c.from);
      EXPECT_EQ(count(src.source, to), count(was, to) + n);
      EXPECT_EQ(src.source.size(), was.size() + n * to.size() - n * std::string(c.from).size());
      EXPECT_NE(src.source, base->backends.at(backend).source);
      EXPECT_EQ(src.entry, base->backends.at(backend).entry);
      EXPECT_EQ(src.default_shapes, base->backends.at(backend).default_shapes);
    }
    EXPECT_EQ(k->family, c.base);
    EXPECT_EQ(base->family, "");
    EXPECT_EQ(k->tolerance.at(DType::kBF16).rtol, base->tolerance.at(DType::kBF16).rtol);
    EXPECT_EQ(k->flops({4, 8}), base->flops({4, 8}));
  }
  KernelSpec softmax = *find("softmax");
  EXPECT_THROW(with_eps(softmax, "softmax_e5", "1e-6", "1e-5"), std::logic_error) << "no eps literal to replace";
}

TEST(KernelsRegistry, EnumerateSpaceIsTheCartesianProductInStableOrder) {
  std::vector<Tunable> space = {{"A", {1, 2}, 1}, {"B", {10, 20, 30}, 20}};
  auto points = enumerate_space(space);
  ASSERT_EQ(points.size(), 6u);
  EXPECT_EQ(points[0], (std::map<std::string, int64_t>{{"A", 1}, {"B", 10}}));
  EXPECT_EQ(points[1], (std::map<std::string, int64_t>{{"A", 1}, {"B", 20}}));
  EXPECT_EQ(points[5], (std::map<std::string, int64_t>{{"A", 2}, {"B", 30}}));
  std::set<std::map<std::string, int64_t>> unique(points.begin(), points.end());
  EXPECT_EQ(unique.size(), 6u);
  EXPECT_EQ(enumerate_space(space), points);
}

TEST(KernelsRegistry, EmptySpaceHasOnePointAndAnEmptyValueListHasNone) {
  EXPECT_EQ(enumerate_space({}).size(), 1u);
  EXPECT_TRUE(enumerate_space({{"A", {}, 0}}).empty());
}

TEST(KernelsRegistry, DefaultConfigTakesEachDefault) {
  std::vector<Tunable> space = {{"A", {1, 2}, 2}, {"B", {10, 20}, 10}};
  EXPECT_EQ(default_config(space), (std::map<std::string, int64_t>{{"A", 2}, {"B", 10}}));
  EXPECT_EQ(config_value({{"A", 1}}, space, "A", 0), 1);
  EXPECT_EQ(config_value({}, space, "B", 0), 10);
  EXPECT_EQ(config_value({}, space, "C", 7), 7);
}

TEST(KernelsRegistry, SoftmaxSpecHasBothBackendsWithRealSpaces) {
  const KernelSpec* k = find("softmax");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->dtypes, (std::vector<DType>{DType::kF32, DType::kF16, DType::kBF16}));
  for (Backend b : {Backend::kCpu, Backend::kCuda}) {
    const BackendSource& s = k->backends.at(b);
    EXPECT_FALSE(s.entry.empty());
    EXPECT_NE(s.source.find(s.entry), std::string::npos) << "the embedded source defines " << s.entry;
    EXPECT_GE(s.space.size(), 2u);
    EXPECT_GE(enumerate_space(s.space).size(), 8u);
    EXPECT_FALSE(s.default_shapes.empty());
    for (const Tunable& t : s.space) {
      EXPECT_NE(std::find(t.values.begin(), t.values.end(), t.default_value), t.values.end()) << t.name;
      EXPECT_NE(s.source.find(t.name), std::string::npos) << t.name << " is used by the source";
    }
    for (const auto& shape : s.default_shapes) EXPECT_EQ(k->check_shape(shape), "");
  }
  for (DType d : k->dtypes) EXPECT_TRUE(k->tolerance.count(d));
  EXPECT_LT(k->tolerance.at(DType::kF32).rtol, k->tolerance.at(DType::kF16).rtol);
}

TEST(KernelsRegistry, SoftmaxFormulasAndShapeCheck) {
  const KernelSpec* k = find("softmax");
  EXPECT_DOUBLE_EQ(k->flops({4, 8}), 5.0 * 32);
  EXPECT_DOUBLE_EQ(k->bytes({4, 8}, DType::kF32), 2.0 * 32 * 4);
  EXPECT_DOUBLE_EQ(k->bytes({4, 8}, DType::kBF16), 2.0 * 32 * 2);
  EXPECT_NE(k->check_shape({4}), "");
  EXPECT_NE(k->check_shape({0, 4}), "");
  EXPECT_NE(k->check_shape({4, 8, 2}), "");
}

TEST(KernelsRegistry, SoftmaxCudaGeometryFollowsTheConfig) {
  const KernelSpec* k = find("softmax");
  ASSERT_NE(k->cuda_geometry, nullptr);
  LaunchGeometry g = k->cuda_geometry({{"AK_THREADS", 512}, {"AK_WARP_PER_ROW", 0}}, {1000, 1023}, DType::kF32);
  EXPECT_EQ(g.grid[0], 1000u);
  EXPECT_EQ(g.block[0], 512u);
  EXPECT_EQ(g.grid[1] * g.grid[2] * g.block[1] * g.block[2], 1u);
  g = k->cuda_geometry({{"AK_THREADS", 256}, {"AK_WARP_PER_ROW", 1}}, {1000, 1023}, DType::kF16);
  EXPECT_EQ(g.block[0], 256u);
  EXPECT_EQ(g.grid[0], 125u);  // 8 rows per block
  g = k->cuda_geometry({}, {3, 7}, DType::kBF16);  // defaults
  EXPECT_EQ(g.block[0], 256u);
  EXPECT_EQ(g.grid[0], 3u);
}

TEST(KernelsRegistry, FusedMlpIsThreeGemmPhasesOverAWorkspace) {
  const KernelSpec* k = find("fused_mlp");
  ASSERT_NE(k, nullptr);
  const BackendSource& s = k->backends.at(Backend::kCuda);
  // matmul's GEMM is inlined, with its own include, so the source is self-contained
  EXPECT_NE(s.source.find("ak_fused_mlp("), std::string::npos);
  // the harness appends the workspace and the phase after the type's parameters
  EXPECT_NE(s.source.find("long long F, void* workspace, long long phase) {"), std::string::npos);
  EXPECT_NE(s.source.find("gemm_tile("), std::string::npos);
  EXPECT_NE(s.source.find("typedef float elem_t"), std::string::npos);
  EXPECT_EQ(s.source.find("#include \""), std::string::npos);
  EXPECT_EQ(s.source.find("ak_matmul("), s.source.find("ak_matmul(const void* a, const void* b, void* c, long long M,"))
      << "the matmul entry only appears in its comment and behind AK_MATMUL_NO_ENTRY";
  EXPECT_EQ(k->cuda_phases, 3);
  ASSERT_NE(k->cuda_phase_geometry, nullptr);
  ASSERT_NE(k->workspace_bytes, nullptr);
  // [M, H, F] = [300, 100, 1000]: phases 0 and 1 tile [300, 1000], phase 2 [300, 100] (128 x 128 tiles)
  const std::vector<int64_t> shape = {300, 100, 1000};
  EXPECT_EQ(k->cuda_phase_geometry({}, shape, DType::kF16, 0).grid[0], 3u * 8u);
  EXPECT_EQ(k->cuda_phase_geometry({}, shape, DType::kF16, 1).grid[0], 3u * 8u);
  EXPECT_EQ(k->cuda_phase_geometry({}, shape, DType::kF16, 2).grid[0], 3u * 1u);
  EXPECT_EQ(k->cuda_phase_geometry({}, shape, DType::kF16, 2).block[0], 128u);
  EXPECT_EQ(k->cuda_phase_geometry(default_config(s, DType::kF32), shape, DType::kF32, 2).block[0], 256u)
      << "fp32 default 2 x 4 warps";
  // G (300000 elements, rounded up to 300032) then Hd
  EXPECT_EQ(k->workspace_bytes(shape, DType::kBF16), (300032 + 300000) * 2);
  EXPECT_EQ(k->workspace_bytes({3, 5, 7}, DType::kF32), (128 + 21) * 4);
  EXPECT_DOUBLE_EQ(k->flops({2, 3, 5}), 6.0 * 30);
  EXPECT_DOUBLE_EQ(k->bytes({2, 3, 5}, DType::kF16), (2.0 * 6 + 3.0 * 15) * 2);
  EXPECT_NE(k->check_shape({4, 8}), "");
  EXPECT_NE(k->check_shape({4, 0, 8}), "");
  for (const auto& shape_ : s.default_shapes) EXPECT_EQ(k->check_shape(shape_), "");
  for (const auto& shape_ : k->edge_shapes) EXPECT_EQ(k->check_shape(shape_), "");
}

// flash_attention's TMA path (AK_WGMMA=3, fp16/bf16; kernels/flash_attention/wgmma_tma.cuh): three
// maps, q, k and v as 3-D tensors {head_dim, seq, batch * heads} in 128-byte swizzled boxes of 64
// columns by AK_BLOCK_M (q) or AK_BLOCK_N (k, v) rows, keyed with the shape; the block gains the
// producer warpgroup; two stages only; fp32 and the other paths ask for no maps.
TEST(KernelsRegistry, FlashAttentionsTmaPathAsksForThreeMapsAndAProducerWarpgroup) {
  for (const char* name : {"flash_attention", "flash_attention_causal"}) {
    const KernelSpec* k = find(name);
    ASSERT_NE(k, nullptr);
    ASSERT_NE(k->cuda_tensor_maps, nullptr) << name;
    const std::map<std::string, int64_t> tma = {{"AK_WGMMA", 3}, {"AK_BLOCK_N", 128}};
    const std::vector<int64_t> shape = {2, 3, 1000, 96};  // [B, H, S, D]
    const std::vector<TensorMapSpec> maps = k->cuda_tensor_maps(tma, shape, DType::kBF16);
    ASSERT_EQ(maps.size(), 3u) << name;
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(maps[size_t(i)].operand, i);
      EXPECT_EQ(maps[size_t(i)].dims, (std::vector<uint64_t>{96, 1000, 6}));
      EXPECT_EQ(maps[size_t(i)].box, (std::vector<uint32_t>{64, 128, 1})) << "AK_BLOCK_M and AK_BLOCK_N are both 128";
      EXPECT_EQ(maps[size_t(i)].swizzle_bytes, 128);
      EXPECT_EQ(maps[size_t(i)].offset, 0u);
    }
    std::map<std::string, int64_t> small = tma;
    small["AK_BLOCK_M"] = 64;
    small["AK_WARPS"] = 4;
    small["AK_BLOCK_N"] = 32;
    const std::vector<TensorMapSpec> small_maps = k->cuda_tensor_maps(small, shape, DType::kF16);
    ASSERT_EQ(small_maps.size(), 3u);
    EXPECT_EQ(small_maps[0].box, (std::vector<uint32_t>{64, 64, 1}));
    EXPECT_EQ(small_maps[1].box, (std::vector<uint32_t>{64, 32, 1}));
    EXPECT_EQ(small_maps[2].box, (std::vector<uint32_t>{64, 32, 1}));
    EXPECT_EQ(tensor_map_slot_bytes(maps.size()), 448u);
    EXPECT_LE(maps.size() + shape.size(), 8u) << "the key: three addresses and the shape";
    EXPECT_TRUE(reads_tensor_maps(*k, tma, shape, DType::kBF16));

    EXPECT_EQ(k->cuda_config_error(tma, DType::kBF16), "");
    EXPECT_EQ(k->cuda_config_error(small, DType::kF16), "");
    EXPECT_EQ(k->cuda_geometry(tma, shape, DType::kBF16).block[0], 8u * 32u + 128u);
    EXPECT_EQ(k->cuda_geometry(small, shape, DType::kF16).block[0], 4u * 32u + 128u);
    EXPECT_EQ(k->cuda_geometry(tma, shape, DType::kBF16).shared_bytes,
              k->cuda_geometry({{"AK_WGMMA", 2}, {"AK_BLOCK_N", 128}}, shape, DType::kBF16).shared_bytes)
        << "AK_WGMMA=2's tiles and its 1 KiB for the alignment";
    EXPECT_EQ(k->cuda_geometry({{"AK_WGMMA", 2}}, shape, DType::kBF16).block[0], 256u);
    EXPECT_NE(k->cuda_config_error({{"AK_WGMMA", 3}, {"AK_STAGES", 1}}, DType::kBF16), "");
    EXPECT_NE(k->cuda_config_error({{"AK_WGMMA", 3}, {"AK_MIN_BLOCKS", 2}}, DType::kBF16), "");
    EXPECT_NE(k->cuda_config_error({{"AK_WGMMA", 3}, {"AK_WARPS", 4}}, DType::kBF16), "") << "32 rows a warp";
    EXPECT_NE(k->cuda_config_error({{"AK_WGMMA", 3}}, DType::kF32), "");
    EXPECT_TRUE(k->cuda_tensor_maps(tma, shape, DType::kF32).empty());
    EXPECT_TRUE(k->cuda_tensor_maps({{"AK_WGMMA", 2}}, shape, DType::kBF16).empty());
    EXPECT_TRUE(k->cuda_tensor_maps({}, shape, DType::kBF16).empty());
    EXPECT_FALSE(reads_tensor_maps(*k, {{"AK_WGMMA", 1}}, shape, DType::kBF16));
    // AK_WGMMA=4: the same maps and block, two computing warpgroups only.
    EXPECT_EQ(k->cuda_tensor_maps({{"AK_WGMMA", 4}, {"AK_BLOCK_N", 128}}, shape, DType::kBF16).size(), 3u);
    EXPECT_EQ(k->cuda_geometry({{"AK_WGMMA", 4}}, shape, DType::kBF16).block[0], 8u * 32u + 128u);
    EXPECT_EQ(k->cuda_config_error({{"AK_WGMMA", 4}}, DType::kF16), "");
    EXPECT_NE(k->cuda_config_error({{"AK_WGMMA", 4}, {"AK_WARPS", 4}, {"AK_BLOCK_M", 64}}, DType::kF16), "");
    EXPECT_NE(k->cuda_config_error({{"AK_WGMMA", 5}}, DType::kBF16), "");
  }
}

// fused_mlp's gate/up GEMM (AK_GATEUP=1): a tunable of its own beside matmul's, allowed only on the
// TMA paths in fp16/bf16 with AK_BN 128 or 256 (fused_mlp.cu's #error); phase 1's grid is that of
// a [M, 2 F] output (a tile holds half its columns of either product); the maps are the
// three-GEMM sequence's, since the kernel finds phase 0's (x, Wg) and phase 1's (x, Wu) by key.
TEST(KernelsRegistry, FusedMlpsGateUpGemmIsATmaTunableWithPhaseOnesGridDoubled) {
  const KernelSpec* k = find("fused_mlp");
  ASSERT_NE(k, nullptr);
  const BackendSource& s = k->backends.at(Backend::kCuda);
  const auto tunable =
      std::find_if(s.space.begin(), s.space.end(), [](const Tunable& t) { return t.name == "AK_GATEUP"; });
  ASSERT_NE(tunable, s.space.end());
  EXPECT_EQ(tunable->values, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(tunable->default_value, 0);
  EXPECT_EQ(find("matmul")->backends.at(Backend::kCuda).space.size() + 1, s.space.size()) << "matmul's and AK_GATEUP";

  const std::map<std::string, int64_t> tma = {{"AK_WARPS_M", 2}, {"AK_WARPS_N", 4}, {"AK_BN", 256},
                                              {"AK_BK", 64},     {"AK_STAGES", 4},  {"AK_WGMMA", 2}};
  std::map<std::string, int64_t> gateup = tma;
  gateup["AK_GATEUP"] = 1;
  EXPECT_EQ(k->cuda_config_error(gateup, DType::kBF16), "");
  EXPECT_EQ(k->cuda_config_error(gateup, DType::kF16), "");
  std::map<std::string, int64_t> pingpong = gateup;
  pingpong["AK_WGMMA"] = 3;
  pingpong["AK_BM"] = 64;
  EXPECT_EQ(k->cuda_config_error(pingpong, DType::kBF16), "");
  auto refused = [&](std::map<std::string, int64_t> c, DType d) {
    const std::string e = k->cuda_config_error(c, d);
    return e.find("AK_GATEUP") != std::string::npos;
  };
  std::map<std::string, int64_t> c = gateup;
  c["AK_WGMMA"] = 1;
  EXPECT_TRUE(refused(c, DType::kBF16)) << "cp.async wgmma: no maps";
  c = gateup;
  c["AK_WGMMA"] = 0;
  EXPECT_TRUE(refused(c, DType::kBF16));
  c = gateup;
  c["AK_BN"] = 64;
  c["AK_WARPS_M"] = 4;
  c["AK_WARPS_N"] = 2;
  EXPECT_EQ(find("matmul")->cuda_config_error(c, DType::kBF16), "") << "matmul's GEMM takes it";
  EXPECT_TRUE(refused(c, DType::kBF16)) << "a 64-column block a half";
  c = gateup;
  c["AK_GATEUP"] = 2;
  EXPECT_TRUE(refused(c, DType::kBF16));
  EXPECT_TRUE(refused({{"AK_GATEUP", 1}}, DType::kF32)) << "fp32 has no TMA path";
  EXPECT_EQ(k->cuda_config_error({{"AK_GATEUP", 0}}, DType::kF32), "");

  // [M, H, F] = [300, 100, 1000], 128 x 256 tiles: phase 1 tiles [300, 2000] (3 x 8) where
  // phases 0 and 2 tile [300, 1000] (3 x 4) and [300, 100] (3 x 1).
  const std::vector<int64_t> shape = {300, 100, 1000};
  EXPECT_EQ(k->cuda_phase_geometry(gateup, shape, DType::kBF16, 0).grid[0], 3u * 4u);
  EXPECT_EQ(k->cuda_phase_geometry(gateup, shape, DType::kBF16, 1).grid[0], 3u * 8u);
  EXPECT_EQ(k->cuda_phase_geometry(tma, shape, DType::kBF16, 1).grid[0], 3u * 4u);
  EXPECT_EQ(k->cuda_phase_geometry(gateup, shape, DType::kBF16, 2).grid[0], 3u * 1u);
  for (int p = 0; p < 3; ++p) {
    const PhaseTensorMaps with = k->cuda_phase_tensor_maps(gateup, shape, DType::kBF16, p);
    const PhaseTensorMaps without = k->cuda_phase_tensor_maps(tma, shape, DType::kBF16, p);
    ASSERT_EQ(with.maps.size(), 2u) << p;
    EXPECT_EQ(with.key, without.key) << p;
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(with.maps[i].operand, without.maps[i].operand) << p;
      EXPECT_EQ(with.maps[i].dims, without.maps[i].dims) << p;
      EXPECT_EQ(with.maps[i].box, without.maps[i].box) << p;
    }
  }
  EXPECT_EQ(k->cuda_phase_tensor_maps(gateup, shape, DType::kBF16, 0).maps[1].operand, 1) << "x with Wg";
  EXPECT_EQ(k->cuda_phase_tensor_maps(gateup, shape, DType::kBF16, 1).maps[1].operand, 2) << "x with Wu";
}

// matmul's TMA paths (AK_WGMMA=2 and 3, fp16/bf16): the sandbox builds A's map in boxes of AK_BK x AK_BM
// and B's in 64 x AK_BK, both 128-byte swizzled; the block gains the producer warpgroup; the
// path's constraints are refused before a compile; fp32 and the other settings ask for no maps.
// AK_MAX_BLOCKS caps the grid.
TEST(KernelsRegistry, MatmulsTmaPathAsksForTwoMapsAndAProducerWarpgroup) {
  const KernelSpec* k = find("matmul");
  ASSERT_NE(k, nullptr);
  ASSERT_NE(k->cuda_tensor_maps, nullptr);
  const std::map<std::string, int64_t> tma = {{"AK_WARPS_M", 2}, {"AK_WARPS_N", 4}, {"AK_BN", 256},
                                              {"AK_BK", 64},     {"AK_STAGES", 4},  {"AK_WGMMA", 2}};
  const std::vector<int64_t> shape = {300, 264, 200};  // [M, N, K]
  const std::vector<TensorMapSpec> maps = k->cuda_tensor_maps(tma, shape, DType::kBF16);
  ASSERT_EQ(maps.size(), 2u);
  EXPECT_EQ(maps[0].operand, 0);
  EXPECT_EQ(maps[0].dims, (std::vector<uint64_t>{200, 300}));  // A [M, K], innermost first
  EXPECT_EQ(maps[0].box, (std::vector<uint32_t>{64, 128}));
  EXPECT_EQ(maps[1].operand, 1);
  EXPECT_EQ(maps[1].dims, (std::vector<uint64_t>{264, 200}));  // B [K, N]
  EXPECT_EQ(maps[1].box, (std::vector<uint32_t>{64, 64}));
  EXPECT_EQ(maps[0].swizzle_bytes, 128);
  EXPECT_EQ(maps[1].swizzle_bytes, 128);
  EXPECT_EQ(tensor_map_slot_bytes(maps.size()) % 64, 0u) << "each slot's maps stay 64-byte aligned";

  EXPECT_EQ(k->cuda_config_error(tma, DType::kBF16), "");
  EXPECT_EQ(k->cuda_geometry(tma, shape, DType::kBF16).block[0], 256u + 128u);
  std::map<std::string, int64_t> cp_async = tma;
  cp_async["AK_WGMMA"] = 1;
  EXPECT_EQ(k->cuda_geometry(cp_async, shape, DType::kBF16).block[0], 256u);
  // AK_MAX_BLOCKS caps the grid (each block then loops over tiles): 4096^2 in 128 x 256 tiles is 512.
  std::map<std::string, int64_t> persistent = tma;
  persistent["AK_MAX_BLOCKS"] = 132;
  EXPECT_EQ(k->cuda_geometry(tma, {4096, 4096, 4096}, DType::kBF16).grid[0], 512u);
  EXPECT_EQ(k->cuda_geometry(persistent, {4096, 4096, 4096}, DType::kBF16).grid[0], 132u);
  EXPECT_EQ(k->cuda_geometry(persistent, shape, DType::kBF16).grid[0], 3u * 2u) << "fewer tiles than the cap";
  persistent["AK_MAX_BLOCKS"] = -1;
  EXPECT_NE(k->cuda_config_error(persistent, DType::kBF16), "");
  EXPECT_TRUE(k->cuda_tensor_maps(cp_async, shape, DType::kBF16).empty());
  EXPECT_TRUE(k->cuda_tensor_maps(tma, shape, DType::kF32).empty());
  EXPECT_NE(k->cuda_config_error(tma, DType::kF32), "") << "fp32 runs the SIMT path either way";

  std::map<std::string, int64_t> bk32 = tma;
  bk32["AK_BK"] = 32;
  EXPECT_NE(k->cuda_config_error(bk32, DType::kF16).find("AK_WGMMA=2 (TMA) needs AK_BK 64"), std::string::npos);
  std::map<std::string, int64_t> tall = tma;  // a 512-row box is past TMA's 256
  tall["AK_BM"] = 512;
  tall["AK_BN"] = 64;
  tall["AK_WARPS_M"] = 4;
  tall["AK_WARPS_N"] = 2;
  EXPECT_NE(k->cuda_config_error(tall, DType::kF16).find("AK_BM <= 256"), std::string::npos);
  std::map<std::string, int64_t> wide = tma;  // 4 x 8 warps: 1024 computing threads, no room for the producer
  wide["AK_WARPS_M"] = 4;
  wide["AK_WARPS_N"] = 8;
  EXPECT_NE(k->cuda_config_error(wide, DType::kF16).find("at most 896 computing threads"), std::string::npos);
  // AK_WGMMA=3 (ping-pong): the same maps and producer warpgroup; each of the two computing
  // warpgroups takes a whole tile, so 128 x 256 (256 accumulators a thread) is refused and 128 x 128
  // is not; four computing warps are refused.
  std::map<std::string, int64_t> pingpong = tma;
  pingpong["AK_WGMMA"] = 3;
  EXPECT_NE(k->cuda_config_error(pingpong, DType::kF16).find("at most 128 accumulators a thread"), std::string::npos)
      << k->cuda_config_error(pingpong, DType::kF16);
  pingpong["AK_BN"] = 128;
  EXPECT_EQ(k->cuda_config_error(pingpong, DType::kF16), "");
  EXPECT_EQ(k->cuda_geometry(pingpong, shape, DType::kBF16).block[0], 256u + 128u);
  EXPECT_EQ(k->cuda_tensor_maps(pingpong, shape, DType::kBF16).size(), 2u);
  // Two tiles a block at least (one for each computing warpgroup), under the cap as before:
  // 4096^2 in 128 x 128 tiles is 1024.
  EXPECT_EQ(k->cuda_geometry(pingpong, {4096, 4096, 4096}, DType::kBF16).grid[0], 512u);
  EXPECT_EQ(k->cuda_geometry(pingpong, shape, DType::kBF16).grid[0], 5u) << "9 tiles of 300 x 264";
  pingpong["AK_MAX_BLOCKS"] = 132;
  EXPECT_EQ(k->cuda_geometry(pingpong, {4096, 4096, 4096}, DType::kBF16).grid[0], 132u);
  EXPECT_EQ(k->cuda_geometry(pingpong, shape, DType::kF32).grid[0], 9u) << "fp32 runs the SIMT path: a block a tile";
  pingpong["AK_WARPS_N"] = 2;
  EXPECT_NE(k->cuda_config_error(pingpong, DType::kF16).find("AK_WGMMA=3 (ping-pong) needs two computing warpgroups"),
            std::string::npos)
      << k->cuda_config_error(pingpong, DType::kF16);
  pingpong["AK_WGMMA"] = 4;
  EXPECT_NE(k->cuda_config_error(pingpong, DType::kF16).find("AK_WGMMA must be 0, 1, 2 or 3"), std::string::npos);

  EXPECT_TRUE(reads_tensor_maps(*k, tma, shape, DType::kBF16));
  EXPECT_FALSE(reads_tensor_maps(*k, cp_async, shape, DType::kBF16));
  // One launch a call: one group, keyed by the shape.
  const auto groups = tensor_map_groups(*k, tma, shape, DType::kBF16);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].maps.size(), 2u);
  EXPECT_EQ(groups[0].key, shape);
  // A type without maps: one empty group.
  const KernelSpec* softmax = find("softmax");
  ASSERT_NE(softmax, nullptr);
  const auto none = tensor_map_groups(*softmax, {}, {64, 64}, DType::kBF16);
  ASSERT_EQ(none.size(), 1u);
  EXPECT_TRUE(none[0].maps.empty());
}

// fused_mlp's TMA path (AK_WGMMA=2): each of its three GEMM phases gets matmul's two maps, keyed
// by the GEMM's own M, N, K (fused_mlp.cu's gemm_tile looks its slot up by A, B, M, N, K): x with
// Wg, then x with Wu (both [M, F] = [M, H] @ [H, F]), then Hd, in the workspace after G's
// 128-element-rounded M * F elements, with Wd ([M, H] = [M, F] @ [F, H]). Three phases' keys for
// each of up to four input sets fit the slots.
TEST(KernelsRegistry, FusedMlpsTmaPathAsksForTwoMapsInEachPhase) {
  const KernelSpec* f = find("fused_mlp");
  ASSERT_NE(f, nullptr);
  ASSERT_NE(f->cuda_phase_tensor_maps, nullptr);
  EXPECT_EQ(f->cuda_tensor_maps, nullptr);
  const std::map<std::string, int64_t> tma = {{"AK_WARPS_M", 2}, {"AK_WARPS_N", 4}, {"AK_BN", 256},
                                              {"AK_BK", 64},     {"AK_STAGES", 4},  {"AK_WGMMA", 2}};
  const std::vector<int64_t> shape = {300, 264, 200};  // [M, H, F]
  EXPECT_EQ(f->cuda_config_error(tma, DType::kBF16), "");
  struct Want {
    int a;
    uint64_t a_offset;
    int b;
    std::vector<int64_t> key;  // M, N, K of the phase's GEMM
  };
  const uint64_t g_elems = (300 * 200 + 127) / 128 * 128;
  const std::vector<Want> want = {
      {0, 0, 1, {300, 200, 264}}, {0, 0, 2, {300, 200, 264}}, {-2, g_elems, 3, {300, 264, 200}}};
  for (int p = 0; p < 3; ++p) {
    const PhaseTensorMaps pm = f->cuda_phase_tensor_maps(tma, shape, DType::kBF16, p);
    ASSERT_EQ(pm.maps.size(), 2u) << "phase " << p;
    const Want& w = want[size_t(p)];
    EXPECT_EQ(pm.key, w.key) << "phase " << p;
    const uint64_t m = uint64_t(w.key[0]), n = uint64_t(w.key[1]), k = uint64_t(w.key[2]);
    EXPECT_EQ(pm.maps[0].operand, w.a);
    EXPECT_EQ(pm.maps[0].offset, w.a_offset);
    EXPECT_EQ(pm.maps[0].dims, (std::vector<uint64_t>{k, m}));  // A [M, K], innermost first
    EXPECT_EQ(pm.maps[0].box, (std::vector<uint32_t>{64, 128}));
    EXPECT_EQ(pm.maps[1].operand, w.b);
    EXPECT_EQ(pm.maps[1].offset, 0u);
    EXPECT_EQ(pm.maps[1].dims, (std::vector<uint64_t>{n, k}));  // B [K, N]
    EXPECT_EQ(pm.maps[1].box, (std::vector<uint32_t>{64, 64}));
    EXPECT_EQ(pm.maps[1].swizzle_bytes, 128);
    EXPECT_LE(pm.maps.size() + pm.key.size(), 8u) << "a key holds 8 values";
  }
  // Hd ends inside the workspace the harness grants.
  EXPECT_LE((g_elems + 300 * 200) * 2, uint64_t(f->workspace_bytes(shape, DType::kBF16)));
  EXPECT_GE(kTensorMapSlots, 3 * 4) << "three phases' keys for each of four input sets";
  EXPECT_TRUE(reads_tensor_maps(*f, tma, shape, DType::kBF16));
  // The groups the sandbox builds maps for: one a phase, each the phase's own.
  const auto groups = tensor_map_groups(*f, tma, shape, DType::kBF16);
  ASSERT_EQ(groups.size(), 3u);
  for (int p = 0; p < 3; ++p) EXPECT_EQ(groups[size_t(p)].key, want[size_t(p)].key) << "phase " << p;
  std::map<std::string, int64_t> cp_async = tma;
  cp_async["AK_WGMMA"] = 1;
  EXPECT_FALSE(reads_tensor_maps(*f, cp_async, shape, DType::kBF16));
  for (const auto& g : tensor_map_groups(*f, cp_async, shape, DType::kBF16)) EXPECT_TRUE(g.maps.empty());
  EXPECT_FALSE(reads_tensor_maps(*f, tma, shape, DType::kF32));
  EXPECT_TRUE(f->cuda_phase_tensor_maps(tma, shape, DType::kF32, 0).maps.empty());
  EXPECT_EQ(f->cuda_config_error(cp_async, DType::kBF16), "");
  EXPECT_EQ(f->cuda_phase_geometry(tma, shape, DType::kBF16, 2).block[0], 256u + 128u) << "the producer warpgroup";
}

// Only the literal as a whole number is replaced: not inside another number.
TEST(KernelsRegistry, WithEpsReplacesTheLiteralOnlyAsAWholeNumber) {
  KernelSpec base = *find("rmsnorm");
  for (auto& [backend, src] : base.backends) src.source = "x 21e-6 y 1e-60 z 1e-6f w (1e-6) v 1.1e-6";
  const KernelSpec k = with_eps(base, "t", "1e-6", "1e-5");
  for (const auto& [backend, src] : k.backends) EXPECT_EQ(src.source, "x 21e-6 y 1e-60 z 1e-5f w (1e-5) v 1.1e-6");
  for (auto& [backend, src] : base.backends) src.source = "x 21e-6 y 1e-60";
  EXPECT_THROW(with_eps(base, "t", "1e-6", "1e-5"), std::logic_error);
}

// Every known good variant (BackendSource::starts) names tunables of its space with their values,
// and fp16 and bf16 (the dtypes the ladders measured) can build it once completed with their
// defaults: a start that no dtype could build would have a model's study campaign refused.
TEST(KernelsRegistry, EveryTypesKnownGoodVariantsAreInItsSpaceAndBuildInFp16AndBf16) {
  int checked = 0;
  for (const KernelSpec* spec : all()) {
    for (const auto& [backend, src] : spec->backends) {
      for (const auto& start : src.starts) {
        for (const auto& [name, value] : start) {
          auto t = std::find_if(src.space.begin(), src.space.end(), [&](const Tunable& x) { return x.name == name; });
          ASSERT_NE(t, src.space.end()) << spec->name << ": " << name;
          EXPECT_NE(std::find(t->values.begin(), t->values.end(), value), t->values.end())
              << spec->name << ": " << name << " = " << value;
        }
        for (DType dtype : {DType::kF16, DType::kBF16}) {
          const auto full = complete_config(src, dtype, start, spec->cuda_config_error);
          if (backend == Backend::kCuda && spec->cuda_config_error) {
            EXPECT_EQ(spec->cuda_config_error(full, dtype), "") << spec->name << " " << dtype_name(dtype);
          }
        }
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 8) << "matmul's, fused_mlp's and the two flash types' variants";
}

}  // namespace
}  // namespace ak::kernels
