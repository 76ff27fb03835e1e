// The flash_attention kernel types: out = softmax(q k^T / sqrt(D)) v per (batch, head), for q, k,
// v, out of shape [batch, heads, seq, head_dim] (the type's shape, [B, H, S, D]), contiguous, one
// dtype. "flash_attention" attends to every key; "flash_attention_causal" lets query i attend to
// keys j <= i only. Scale 1/sqrt(D), no dropout, no mask otherwise.
//
// cuda entry: extern "C" __global__ void ak_flash_attention(const void* q, const void* k,
//                 const void* v, void* out, long long batch, long long heads, long long seq,
//                 long long head_dim)   // dtype via -DAK_DTYPE
// No cpu backend. One source serves both types: flash_attention_causal's starter is the same
// text behind "#define AK_CAUSAL 1". See flash_attention.cu for the tunables and the geometry.
#include <algorithm>
#include <string>

#include "kernels/flash_attention/sources.h"
#include "kernels/registry.h"

namespace ak::kernels::flash_attention {
namespace {

double score_entries(const std::vector<int64_t>& shape) {
  return double(shape.at(0)) * double(shape.at(1)) * double(shape.at(2)) * double(shape.at(2));
}

// Q K^T and P V: 2 S^2 D each per head.
double flops(const std::vector<int64_t>& shape) { return 4.0 * score_entries(shape) * double(shape.at(3)); }
// Only the lower triangle of the score matrix is needed (counted as half of it).
double causal_flops(const std::vector<int64_t>& shape) { return 2.0 * score_entries(shape) * double(shape.at(3)); }

double bytes(const std::vector<int64_t>& shape, DType dtype) {
  // q, k, v read once, out written once
  return 4.0 * double(shape.at(0)) * double(shape.at(1)) * double(shape.at(2)) * double(shape.at(3)) *
         dtype_bytes(dtype);
}

std::string check_shape(const std::vector<int64_t>& shape) {
  if (shape.size() != 4)
    return "flash_attention needs a [batch, heads, seq, head_dim] shape; got " + std::to_string(shape.size()) + " dims";
  for (int64_t s : shape)
    if (s < 1) return "flash_attention needs batch, heads, seq and head_dim >= 1";
  const int64_t d = shape[3];
  if (d > 128 || d % 8 != 0)
    return "flash_attention needs head_dim a multiple of 8 in [8, 128] (the kernel pads it to 64 or 128 and copies "
           "rows in 16-byte chunks); got " + std::to_string(d);
  if (shape[2] > (int64_t{1} << 31)) return "flash_attention supports seq <= 2^31";
  // One block per (head, query tile) of AK_BLOCK_M >= 64 rows, in a 1-D grid.
  if (shape[0] > 0x7fffffff || shape[1] > 0x7fffffff || shape[0] * shape[1] > 0x7fffffff ||
      (shape[2] + 63) / 64 > 0x7fffffff / (shape[0] * shape[1]))
    return "flash_attention supports batch * heads * ceil(seq / 64) <= 2^31 - 1 (one block per 64 query rows)";
  return "";
}

std::vector<Tunable> cuda_space() {
  return {
      {"AK_BLOCK_M", {64, 128}, 128},
      {"AK_BLOCK_N", {32, 64, 128}, 64},
      {"AK_WARPS", {4, 8}, 8},
      {"AK_STAGES", {1, 2}, 2},
      {"AK_MIN_BLOCKS", {1, 2}, 1},
      {"AK_WGMMA", {0, 1, 2, 3, 4}, 0},
      // The blocks' order: a tile of every head, then the next (0), or a head's tiles together (1),
      // so that the blocks resident at one time share a few heads' K and V in L2.
      {"AK_HEAD_MAJOR", {0, 1}, 0},
  };
}

// flash_attention.cu's header: block = AK_WARPS warps; a 1-D grid of one block per (head, query
// tile of AK_BLOCK_M rows); dynamic shared memory for the Q tile and AK_STAGES buffers of K and of
// V, rows padded to 64 or 128 elements.
LaunchGeometry cuda_geometry(const std::map<std::string, int64_t>& config, const std::vector<int64_t>& shape,
                             DType dtype) {
  static const std::vector<Tunable> space = cuda_space();
  auto v = [&](const char* name) { return std::max<int64_t>(1, config_value(config, space, name, 1)); };
  const int64_t bm = v("AK_BLOCK_M"), bn = v("AK_BLOCK_N"), stages = v("AK_STAGES");
  const int64_t padded_d = shape.at(3) <= 64 ? 64 : 128;
  const int64_t elem_bytes = dtype == DType::kF32 ? 4 : 2;
  const int64_t blocks = (shape.at(2) + bm - 1) / bm * shape.at(0) * shape.at(1);
  LaunchGeometry g;
  g.grid[0] = unsigned(std::clamp<int64_t>(blocks, 1, 0x7fffffff));
  const int64_t wgmma = dtype == DType::kF32 ? 0 : config_value(config, space, "AK_WGMMA", 0);
  // AK_WGMMA=3 and 4: the producer warpgroup after the computing warps (on every GPU; off Hopper it
  // returns at once).
  g.block[0] = unsigned(std::min<int64_t>(v("AK_WARPS") * 32 + (wgmma >= 3 ? 128 : 0), 1 << 20));
  // AK_WGMMA=1 to 4: 1 KiB more, for rounding the start up to the swizzle period (1024 bytes).
  const int64_t align = wgmma != 0 ? 1024 : 0;
  g.shared_bytes =
      unsigned(std::min<int64_t>((bm + 2 * stages * bn) * padded_d * elem_bytes + align, int64_t{1} << 30));
  return g;
}

// AK_WGMMA=3 and 4 (fp16/bf16; wgmma_tma.cuh): q, k and v as 3-D tensors {head_dim, seq, batch * heads}
// (innermost first) in boxes of 64 x AK_BLOCK_M (q) or 64 x AK_BLOCK_N (k, v) x 1, 128-byte
// swizzled: one box is one 64-column block of the wgmma tile layout. Otherwise none.
std::vector<TensorMapSpec> cuda_tensor_maps(const std::map<std::string, int64_t>& config,
                                            const std::vector<int64_t>& shape, DType dtype) {
  static const std::vector<Tunable> space = cuda_space();
  if (dtype == DType::kF32 || config_value(config, space, "AK_WGMMA", 0) < 3) return {};
  const std::vector<uint64_t> dims = {uint64_t(shape.at(3)), uint64_t(shape.at(2)),
                                      uint64_t(shape.at(0)) * uint64_t(shape.at(1))};
  const uint32_t bm = uint32_t(config_value(config, space, "AK_BLOCK_M", 128));
  const uint32_t bn = uint32_t(config_value(config, space, "AK_BLOCK_N", 64));
  return {{0, dims, {64, bm, 1}, 128}, {1, dims, {64, bn, 1}, 128}, {2, dims, {64, bn, 1}, 128}};
}

// flash_attention.cu's #error constraints on its tunables; "" when the configuration compiles.
std::string cuda_config_error(const std::map<std::string, int64_t>& config, DType dtype) {
  static const std::vector<Tunable> space = cuda_space();
  auto v = [&](const char* name) { return config_value(config, space, name, 1); };
  const int64_t bm = v("AK_BLOCK_M"), bn = v("AK_BLOCK_N"), warps = v("AK_WARPS"), stages = v("AK_STAGES");
  const int64_t min_blocks = v("AK_MIN_BLOCKS");
  if (bm != 64 && bm != 128) return "AK_BLOCK_M must be 64 or 128";
  if (bn != 32 && bn != 64 && bn != 128) return "AK_BLOCK_N must be 32, 64 or 128";
  if (warps != 4 && warps != 8) return "AK_WARPS must be 4 or 8";
  if (stages != 1 && stages != 2) return "AK_STAGES must be 1 or 2";
  if (min_blocks != 1 && min_blocks != 2) return "AK_MIN_BLOCKS must be 1 or 2";
  if (bm / warps != 16 && bm / warps != 32) return "AK_BLOCK_M / AK_WARPS must be 16 or 32";
  const int64_t wgmma = config_value(config, space, "AK_WGMMA", 0);
  if (wgmma < 0 || wgmma > 4) return "AK_WGMMA must be 0, 1, 2, 3 or 4";
  if (wgmma != 0 && dtype == DType::kF32)
    return "AK_WGMMA=1, 2, 3 or 4 is for fp16/bf16 (fp32 runs the SIMT path either way)";
  if (wgmma == 4 && warps != 8) return "AK_WGMMA=4 needs AK_WARPS = 8 (two computing warpgroups to take turns)";
  // Checked where the path is compiled (sm_90a); elsewhere the setting is ignored.
  if (wgmma != 0 && bm / warps != 16)
    return "AK_WGMMA=" + std::to_string(wgmma) + " needs AK_BLOCK_M / AK_WARPS = 16 (one warpgroup per 64 rows)";
  // Two blocks an SM cap registers at 128, under what the accumulators need: ptxas spills and
  // serialises the wgmma (C7512).
  if (wgmma != 0 && min_blocks != 1) return "AK_WGMMA=1 to 4 need AK_MIN_BLOCKS = 1";
  if (wgmma >= 2 && stages != 2)
    return "AK_WGMMA=" + std::to_string(wgmma) + " needs AK_STAGES = 2 (its copies run one tile ahead)";
  const int64_t elem = dtype == DType::kF32 ? 4 : 2;
  if ((bm + 2 * stages * bn) * 128 * elem + (wgmma ? 1024 : 0) > 227 * 1024)
    return "the Q tile and the K/V rings exceed 227 KiB";
  return "";
}

KernelSpec make(const std::string& name, const std::string& prefix, double (*flops_of)(const std::vector<int64_t>&)) {
  KernelSpec k;
  k.name = name;
  k.dtypes = {DType::kF32, DType::kF16, DType::kBF16};
  // LLaMA-7B-like heads (32 of 128) at 2k and 8k tokens, 64-wide heads, and a shape that no tile
  // divides. The fp64 reference of the 8k shape materialises its 32 x 8192^2 scores, some 17 GB
  // per copy: one such shape at most.
  k.backends[Backend::kCuda] = BackendSource{
      prefix + std::string(kCudaSource),
      "ak_flash_attention",
      cuda_space(),
      {{2, 32, 2048, 128}, {1, 32, 8192, 128}, {4, 16, 2048, 64}, {1, 3, 1000, 64}},
      // The warpgroup MMA path in fp16/bf16 (ignored below sm_90a, where the default tile's 97 KiB
      // of shared memory still fit an RTX 4090's 99 KiB): 1.3-1.5x the mma.sync path at every
      // shape on an H100, and all 132 jobs of the two wgmma campaigns PASS there (README.md).
      {{DType::kF16, {{"AK_WGMMA", 1}}}, {DType::kBF16, {{"AK_WGMMA", 1}}}},
  };
  // README.md, fp16/bf16 on Hopper: TMA at 128 keys a tile, the warpgroups taking turns (4) or not
  // (3): 0.75-0.94x of SDPA on an H100 (2026-12-08); then the cp.async wgmma path's best tile.
  k.backends[Backend::kCuda].starts = {
      {{"AK_BLOCK_N", 128}, {"AK_WGMMA", 4}},
      {{"AK_BLOCK_N", 128}, {"AK_WGMMA", 3}},
      {{"AK_BLOCK_N", 128}, {"AK_WGMMA", 1}},
  };
  // Checked as |out - ref| <= atol * (P @ |v|) + rtol * |ref| (the harness's tolerance_scale, P the
  // exact attention weights): an output is a convex combination of v rows whose rounding errors
  // grow with the rows' magnitudes, not with the result, which may cancel. atol: P is rounded to
  // the dtype before the P @ V mma (fp16 2^-11, bf16 2^-8 relative per weight, at most that
  // fraction of P @ |v| in all), with a margin of 4x (fp16) and 2.5x (bf16). fp32 keeps P in
  // fp32; what remains is the fp32 rounding of the scores, an absolute error in the exponent that
  // grows with |q| |k|: at the hostile set's temperature of 10 (scores of ~40, head_dim 128) it
  // moves the weights by ~1e-5 and reached 0.9 x 2e-5 * (P @ |v|) in a float32 numpy model at
  // seq 2048, hence 1e-4; exp2.approx (~2^-22) and the P @ V sums (~sqrt(seq) 2^-24) are smaller.
  // rtol: one rounding of the output to its dtype (fp32 2^-24, fp16 2^-11, bf16 2^-8), and the
  // reference's own. fp16 adds to the scale what rounding weights below 2^-14 to fp16 costs,
  // an absolute error of up to 2^-25 each that no fraction of P @ |v| covers (reference.cc,
  // weights_on_abs_v; seen on the H100 as two outputs of 10^7 failing 'large_logits' and
  // 'mixed_scales' in both the mma.sync and the wgmma paths).
  k.tolerance = {
      {DType::kF32, {1e-4, 1e-6}},
      {DType::kF16, {2e-3, 2e-3}},
      {DType::kBF16, {1e-2, 1.6e-2}},
  };
  k.flops = flops_of;
  k.bytes = bytes;
  k.check_shape = check_shape;
  k.cuda_geometry = cuda_geometry;
  k.cuda_config_error = cuda_config_error;
  k.cuda_tensor_maps = cuda_tensor_maps;
  // Static shared memory: the TMA path's (AK_WGMMA=3) mbarriers and slot index, as ptxas lays them
  // out; the other paths have none.
  k.cuda_static_shared_bytes = 256;
  // seq 1, one short of and one past a tile, tiles of keys cut by seq; head_dim 8, 40 and 96
  // (padded to 64 and 128 with zeros).
  k.edge_shapes = {{1, 1, 1, 64},   {1, 1, 127, 64}, {1, 2, 129, 128}, {2, 3, 1023, 64},
                   {1, 1, 4097, 64}, {1, 2, 65, 8},   {2, 1, 200, 40},  {1, 1, 333, 96}};
  return k;
}

}  // namespace

KernelSpec make_spec() { return make("flash_attention", "", flops); }

KernelSpec make_causal_spec() { return make("flash_attention_causal", "#define AK_CAUSAL 1\n", causal_flops); }

}  // namespace ak::kernels::flash_attention
