// The matmul kernel type: C = A @ B for A [M, K], B [K, N], C [M, N], row-major, one dtype, fp32
// accumulation. The shape is [M, N, K]. fp32 means fp32 arithmetic (no TF32).
//
// cpu entry:  extern "C" int ak_matmul_cpu(const void* a, const void* b, void* c, int64_t M,
//                                          int64_t N, int64_t K, int dtype)   // 0 = success
// cuda entry: extern "C" __global__ void ak_matmul(const void* a, const void* b, void* c,
//                                                  long long M, long long N, long long K)
// See matmul_cpu.cc and matmul.cu for the tunables and the launch geometry.
#include <algorithm>
#include <string>

#include "kernels/matmul/gemm.h"
#include "kernels/matmul/sources.h"
#include "kernels/registry.h"

namespace ak::kernels::matmul {
namespace {

double flops(const std::vector<int64_t>& shape) {
  return 2.0 * double(shape.at(0)) * double(shape.at(1)) * double(shape.at(2));
}

double bytes(const std::vector<int64_t>& shape, DType dtype) {
  // A and B read once, C written once
  const double m = double(shape.at(0)), n = double(shape.at(1)), k = double(shape.at(2));
  return (m * k + k * n + m * n) * dtype_bytes(dtype);
}

std::string check_shape(const std::vector<int64_t>& shape) {
  if (shape.size() != 3) return "matmul needs an [M, N, K] shape; got " + std::to_string(shape.size()) + " dims";
  if (shape[0] < 1 || shape[1] < 1 || shape[2] < 1) return "matmul needs M, N and K >= 1";
  if (shape[0] > (int64_t{1} << 31) || shape[1] > (int64_t{1} << 31) || shape[2] > (int64_t{1} << 31))
    return "matmul supports M, N and K <= 2^31";
  return "";
}

// matmul.cu's header: block = WARPS_M * WARPS_N warps; a 1-D grid of one block per BM x BN tile
// of C; dynamic shared memory of STAGES stages of an A and a B tile (fp32: A transposed, rows
// padded by 4).
LaunchGeometry cuda_geometry(const std::map<std::string, int64_t>& config, const std::vector<int64_t>& shape,
                             DType dtype) {
  return gemm_geometry(config, shape.at(0), shape.at(1), dtype);
}

std::string triton_signature(DType d) {
  const std::string t = dtype_name(d);
  return "a_ptr:*" + t + ",b_ptr:*" + t + ",c_ptr:*" + t + ",M:i64,N:i64,K:i64";
}

// matmul.py: one program per BM x BN tile of C.
LaunchGeometry triton_grid(const std::map<std::string, int64_t>& config, const std::vector<int64_t>& shape, DType) {
  const int64_t bm = std::max<int64_t>(1, config.count("BM") ? config.at("BM") : 128);
  const int64_t bn = std::max<int64_t>(1, config.count("BN") ? config.at("BN") : 128);
  LaunchGeometry g;
  g.grid[0] = unsigned(std::clamp<int64_t>(((shape.at(0) + bm - 1) / bm) * ((shape.at(1) + bn - 1) / bn), 1, 0x7fffffff));
  return g;
}

// AK_WGMMA=2 or 3 (fp16/bf16): A's tiles as boxes of AK_BK (64) x AK_BM, B's as 64 x 64 column
// blocks, both in 128-byte swizzle (wgmma_tma.cuh).
std::vector<TensorMapSpec> cuda_tensor_maps(const std::map<std::string, int64_t>& config,
                                            const std::vector<int64_t>& shape, DType dtype) {
  return gemm_tensor_maps(config, uint64_t(shape.at(0)), uint64_t(shape.at(1)), uint64_t(shape.at(2)), dtype, 0, 0, 1);
}

}  // namespace

std::vector<TensorMapSpec> gemm_tensor_maps(const std::map<std::string, int64_t>& config, uint64_t m, uint64_t n,
                                            uint64_t k, DType dtype, int a, uint64_t a_offset, int b) {
  static const std::vector<Tunable> space = cuda_space();
  if (dtype == DType::kF32 || config_value(config, space, "AK_WGMMA", 0) < 2) return {};
  const uint32_t bm = uint32_t(config_value(config, space, "AK_BM", 128));
  const uint32_t bk = uint32_t(config_value(config, space, "AK_BK", 64));
  return {{a, {k, m}, {bk, bm}, 128, a_offset}, {b, {n, k}, {64, bk}, 128}};
}

std::vector<Tunable> cuda_space() {
  return {
      {"AK_BM", {64, 128, 256}, 128},
      {"AK_BN", {64, 128, 256}, 128},
      {"AK_BK", {16, 32, 64}, 32},
      {"AK_WARPS_M", {1, 2, 4}, 2},
      {"AK_WARPS_N", {1, 2, 4}, 2},
      {"AK_STAGES", {2, 3, 4, 5}, 4},
      {"AK_GROUP_M", {1, 8}, 8},
      // fp16/bf16 on sm_90a: warpgroup MMA (wgmma.cuh), fed by cp.async (1) or by TMA from a
      // producer warpgroup (2, wgmma_tma.cuh), or by TMA to two computing warpgroups each on a tile
      // of its own, taking turns (3, ping-pong); ignored on other GPUs, refused in fp32.
      {"AK_WGMMA", {0, 1, 2, 3}, 0},
      // At most this many blocks, each computing every gridDim-th tile (0: a block per tile). The
      // H100's and H200's 132 SMs, once or twice; other GPUs' studies find their own value.
      {"AK_MAX_BLOCKS", {0, 132, 264}, 0},
  };
}

LaunchGeometry gemm_geometry(const std::map<std::string, int64_t>& config, int64_t rows, int64_t cols, DType dtype) {
  static const std::vector<Tunable> space = cuda_space();
  auto v = [&](const char* name) { return std::max<int64_t>(1, config_value(config, space, name, 1)); };
  const int64_t bm = v("AK_BM"), bn = v("AK_BN"), bk = v("AK_BK"), stages = v("AK_STAGES");
  const int64_t tiles = ((rows + bm - 1) / bm) * ((cols + bn - 1) / bn);
  const int64_t smem = dtype == DType::kF32 ? stages * ((bm + 4) * bk + bk * bn) * 4
                                            : stages * (bm * bk + bk * bn) * 2;
  const int64_t wgmma = dtype == DType::kF32 ? 0 : config_value(config, space, "AK_WGMMA", 0);
  // AK_WGMMA=2 or 3: the producer warpgroup after the computing warps (in every path; off Hopper it
  // returns at once).
  const int64_t producer = wgmma >= 2 ? 128 : 0;
  const int64_t cap = config_value(config, space, "AK_MAX_BLOCKS", 0);
  // AK_WGMMA=3 (ping-pong): two tiles a block at least, one for each computing warpgroup, or one
  // of them would idle beside the other on the SM.
  const int64_t want = wgmma == 3 ? (tiles + 1) / 2 : tiles;
  LaunchGeometry g;
  g.grid[0] = unsigned(std::clamp<int64_t>(cap > 0 ? std::min(want, cap) : want, 1, 0x7fffffff));
  g.block[0] = unsigned(std::min<int64_t>(v("AK_WARPS_M") * v("AK_WARPS_N") * 32 + producer, 1 << 20));
  g.shared_bytes = unsigned(std::min<int64_t>(smem, int64_t{1} << 30));
  return g;
}

std::string gemm_config_error(const std::map<std::string, int64_t>& config, DType dtype) {
  static const std::vector<Tunable> space = cuda_space();
  auto v = [&](const char* name) { return config_value(config, space, name, 1); };
  const int64_t bm = v("AK_BM"), bn = v("AK_BN"), bk = v("AK_BK"), wm_n = v("AK_WARPS_M"), wn_n = v("AK_WARPS_N");
  const int64_t stages = v("AK_STAGES"), group_m = v("AK_GROUP_M");
  auto pow2 = [](int64_t x) { return x >= 1 && (x & (x - 1)) == 0; };
  if (!pow2(bm) || !pow2(bn) || !pow2(bk)) return "AK_BM, AK_BN and AK_BK must be powers of two";
  const int64_t threads = wm_n * wn_n * 32;
  if (wm_n < 1 || wn_n < 1 || threads > 1024) return "AK_WARPS_M and AK_WARPS_N must be >= 1 with at most 1024 threads";
  if (stages < 2 || stages > 8) return "AK_STAGES must be in [2, 8]";
  if (group_m < 1) return "AK_GROUP_M must be >= 1";
  if (v("AK_MAX_BLOCKS") < 0) return "AK_MAX_BLOCKS must be >= 0 (0: a block per tile)";
  const int64_t wm = bm / wm_n, wn = bn / wn_n;  // warp tile (integer division, as the preprocessor's)
  if (dtype == DType::kF32) {
    // The setting changes nothing in fp32: a study that tried both would time one kernel twice.
    if (v("AK_WGMMA") != 0) return "AK_WGMMA=1 is for fp16/bf16 (fp32 runs the SIMT path either way)";
    const int64_t lanes_m = wm >= wn ? 8 : 4, lanes_n = 32 / lanes_m;
    const int64_t tm = wm / lanes_m, tn = wn / lanes_n;
    if (bk < 4) return "fp32: AK_BK must be >= 4";
    if (tm < 4 || tn < 4 || tm * tn > 128) return "fp32: the thread tile must be >= 4 x 4 and <= 128 outputs";
  } else {
    if (bk != 32 && bk != 64) return "fp16/bf16: AK_BK must be 32 or 64";
    if (wm < 16 || wn < 16 || wm * wn > 64 * 64)
      return "fp16/bf16: the warp tile must be at least 16 x 16 and at most 4096 elements";
    if (threads % (bn / 8) != 0) return "fp16/bf16: AK_BN / 8 must divide the thread count";
    const int64_t wgmma = v("AK_WGMMA");
    if (wgmma < 0 || wgmma > 3) return "AK_WGMMA must be 0, 1, 2 or 3";
    if (wgmma >= 2 && (bk != 64 || bm > 256 || threads + 128 > 1024))
      return "AK_WGMMA=" + std::to_string(wgmma) +
             " (TMA) needs AK_BK 64, AK_BM <= 256 (a TMA box) and at most 896 computing threads (a producer "
             "warpgroup joins them)";
    if (wgmma == 3 && threads != 256)
      return "AK_WGMMA=3 (ping-pong) needs two computing warpgroups (AK_WARPS_M * AK_WARPS_N = 8)";
    if (wgmma != 0) {
      // The warpgroups that split a tile's rows (ping-pong: one, each warpgroup has its own tile).
      const int64_t groups = wgmma == 3 ? 1 : std::max<int64_t>(threads / 128, 1);
      const int64_t accumulators = bm / groups / 64 * bn / 2;  // a thread's
      if (threads % 128 != 0 || bm % (64 * groups) != 0 || (bn != 64 && bn != 128 && bn != 256) || stages < 3 ||
          accumulators > 128)
        return "AK_WGMMA=" + std::to_string(wgmma) +
               " needs AK_WARPS_M * AK_WARPS_N a multiple of 4 (whole warpgroups), AK_BM a multiple of 64 "
               "per warpgroup, AK_BN 64, 128 or 256, at most 128 accumulators a thread (AK_BM / warpgroups / 64 * "
               "AK_BN / 2, where with AK_WGMMA=3 each warpgroup has a whole tile) and AK_STAGES >= 3";
      // ptxas gives a thread at most 65536 / (threads in the block) registers, in steps of 8 and at
      // most 255; the accumulators and about 32 more must fit, or it stops with "Insufficient
      // registers" (C7602): 256x256 tiles on four warpgroups have 128 accumulators and 128
      // registers (96 with TMA's producer warpgroup beside them).
      const int64_t block = threads + (wgmma >= 2 ? 128 : 0);
      const int64_t budget = std::min<int64_t>(255, 65536 / block / 8 * 8);
      if (accumulators + 32 > budget)
        return "AK_WGMMA=" + std::to_string(wgmma) + ": " + std::to_string(accumulators) +
               " accumulators a thread and about 32 registers more exceed the " + std::to_string(budget) +
               " registers a thread of a " + std::to_string(block) +
               "-thread block gets; use fewer warps (AK_WARPS_M * AK_WARPS_N) or a smaller AK_BN";
    }
  }
  return "";
}

KernelSpec make_spec() {
  KernelSpec k;
  k.name = "matmul";
  k.dtypes = {DType::kF32, DType::kF16, DType::kBF16};
  k.backends[Backend::kCpu] = BackendSource{
      std::string(kCpuSource),
      "ak_matmul_cpu",
      {
          {"AK_BM", {8, 32, 64}, 32},
          {"AK_BN", {64, 128, 256}, 128},
          {"AK_BK", {32, 128, 256}, 128},
      },
      {{64, 64, 64}, {128, 256, 512}, {200, 100, 300}},
  };
  // Square GEMMs and an LLaMA-7B MLP projection (4096 tokens, 4096 -> 11008), and a shape that no
  // tile divides.
  k.backends[Backend::kCuda] = BackendSource{
      std::string(kCudaSource),
      "ak_matmul",
      cuda_space(),
      {{4096, 4096, 4096}, {8192, 8192, 8192}, {4096, 11008, 4096}, {1000, 1023, 1025}},
      // fp32 (SIMT): 2 x 4 warps keep the thread tile at 8 x 8 without spills; 2 x 2 spills.
      // bf16: the Hopper path where it applies (ignored elsewhere): on the H200 on 2026-12-06 it
      // passed and ran 4096^3 in 324.5 us against mma.sync's 365.9 at the same tile
      // (bench/results/h200-2026-12-06.md). fp16 keeps mma.sync until it is measured there.
      {{DType::kF32, {{"AK_WARPS_N", 4}}}, {DType::kBF16, {{"AK_WGMMA", 1}}}},
  };
  // README.md's ladder, fp16/bf16 on Hopper: wgmma fed by TMA, 128x256x64, a block an SM (0.86-0.95x
  // of cuBLAS on an H100, 2026-12-07); then the ping-pong warpgroups at 128x128.
  k.backends[Backend::kCuda].starts = {
      {{"AK_WARPS_M", 2},
       {"AK_WARPS_N", 4},
       {"AK_BN", 256},
       {"AK_BK", 64},
       {"AK_STAGES", 4},
       {"AK_WGMMA", 2},
       {"AK_MAX_BLOCKS", 132}},
      {{"AK_WARPS_M", 2},
       {"AK_WARPS_N", 4},
       {"AK_BM", 128},
       {"AK_BN", 128},
       {"AK_BK", 64},
       {"AK_STAGES", 5},
       {"AK_WGMMA", 3},
       {"AK_MAX_BLOCKS", 132}},
  };
  // fp32 at BK 32 and 3 stages needs 96 KiB of shared memory; fp16/bf16 half that.
  k.backends[Backend::kTriton] = BackendSource{
      std::string(kTritonSource),
      "matmul_kernel",
      {
          {"BM", {64, 128}, 128},
          {"BN", {64, 128, 256}, 128},
          {"BK", {32, 64}, 32},
          {"GROUP_M", {1, 8}, 8},
          {"AK_NUM_WARPS", {4, 8}, 8},
          {"AK_NUM_STAGES", {2, 3, 4}, 3},
      },
      {{4096, 4096, 4096}, {8192, 8192, 8192}, {4096, 11008, 4096}, {1000, 1023, 1025}},
  };
  k.triton_grid = triton_grid;
  k.triton_signature = triton_signature;
  k.triton_divisible = {"a_ptr", "b_ptr", "c_ptr", "N", "K"};
  // Checked as |out - ref| <= atol * (|A| @ |B|) + rtol * |ref| (the harness's tolerance_scale):
  // a dot product's rounding error grows with the sum of |a_ik * b_kj|, not with the result,
  // which may cancel. atol: fp32 accumulation over K up to a few thousand terms (~sqrt(K) * 2^-24
  // typical) with a margin, in every dtype since every dtype accumulates in fp32; rtol: one
  // rounding of the output (fp32 2^-24, fp16 2^-11, bf16 2^-8), and the reference's own.
  k.tolerance = {
      {DType::kF32, {2e-5, 1e-6}},
      {DType::kF16, {2e-5, 2e-3}},
      {DType::kBF16, {2e-5, 1.6e-2}},
  };
  k.flops = flops;
  k.bytes = bytes;
  k.check_shape = check_shape;
  k.cuda_geometry = cuda_geometry;
  k.cuda_config_error = gemm_config_error;
  // Static shared memory: the TMA paths' (AK_WGMMA >= 2, wgmma_tma.cuh) mbarriers, 16 B a stage,
  // and slot index, padded to the dynamic part's 1024-byte alignment: 1024 B at any AK_STAGES up to
  // 63 (measured at the space's 5: tests/worker/compiler_test.cc). The other paths have none.
  k.cuda_static_shared_bytes = 1024;
  k.cuda_tensor_maps = cuda_tensor_maps;
  // {130, 264, 200}: K and N multiples of 8 (the wgmma path's condition) with ragged tiles in M, N
  // and K.
  k.edge_shapes = {{1, 1, 1},    {127, 1, 1},    {1, 127, 1},    {1, 1, 127},
                   {3, 1023, 5}, {129, 257, 65}, {17, 33, 4097}, {130, 264, 200}};
  return k;
}

}  // namespace ak::kernels::matmul
