// The fused_mlp kernel type: a SwiGLU MLP block, out = (silu(x @ Wg) * (x @ Wu)) @ Wd, for x
// [M, H], Wg and Wu [H, F], Wd [F, H], out [M, H] (row-major, one dtype, fp32 accumulation).
// The shape is [M, H, F]: tokens, hidden size, inner size.
//
// cuda entry: extern "C" __global__ void ak_fused_mlp(const void* x, const void* wg,
//                 const void* wu, const void* wd, void* out, long long M, long long H,
//                 long long F, void* workspace, long long phase)   // dtype via -DAK_DTYPE
// A call is three launches (phases 0, 1, 2; kernels/registry.h, cuda_phases) sharing a
// workspace of 2 M F elements; see fused_mlp.cu (AK_GATEUP=1: phases 0 and 1 as one gate/up GEMM on
// the TMA paths). No cpu or Triton backend.
#include <algorithm>
#include <string>

#include "kernels/fused_mlp/sources.h"
#include "kernels/matmul/gemm.h"
#include "kernels/registry.h"

namespace ak::kernels::fused_mlp {
namespace {

// Three GEMMs of 2 M H F each (the gate and product are lower order).
double flops(const std::vector<int64_t>& shape) {
  return 6.0 * double(shape.at(0)) * double(shape.at(1)) * double(shape.at(2));
}

double bytes(const std::vector<int64_t>& shape, DType dtype) {
  // x and the three weights read once, out written once (the intermediates are not required traffic)
  const double m = double(shape.at(0)), h = double(shape.at(1)), f = double(shape.at(2));
  return (2.0 * m * h + 3.0 * h * f) * dtype_bytes(dtype);
}

std::string check_shape(const std::vector<int64_t>& shape) {
  if (shape.size() != 3)
    return "fused_mlp needs an [M, H, F] shape (tokens, hidden, inner); got " + std::to_string(shape.size()) + " dims";
  if (shape[0] < 1 || shape[1] < 1 || shape[2] < 1) return "fused_mlp needs M, H and F >= 1";
  if (shape[0] > (int64_t{1} << 31) || shape[1] > (int64_t{1} << 31) || shape[2] > (int64_t{1} << 31))
    return "fused_mlp supports M, H and F <= 2^31";
  if (shape[0] * shape[2] > (int64_t{1} << 40)) return "fused_mlp supports M * F <= 2^40 (its workspace)";
  return "";
}

// matmul's tunables and AK_GATEUP: phase 1 as one gate/up GEMM on the TMA paths (fused_mlp.cu).
std::vector<Tunable> cuda_space() {
  std::vector<Tunable> space = matmul::cuda_space();
  space.push_back({"AK_GATEUP", {0, 1}, 0});
  return space;
}

bool gate_up(const std::map<std::string, int64_t>& config) {
  auto it = config.find("AK_GATEUP");
  return it != config.end() && it->second == 1;
}

// Phases 0 and 1 write [M, F], phase 2 [M, H], each with matmul's GEMM geometry; with AK_GATEUP
// phase 1's tiles are those of [M, 2 F] (each holds half its columns of either product).
LaunchGeometry phase_geometry(const std::map<std::string, int64_t>& config, const std::vector<int64_t>& shape,
                              DType dtype, int phase) {
  const int64_t cols = phase == 2 ? shape.at(1) : phase == 1 && gate_up(config) ? 2 * shape.at(2) : shape.at(2);
  return matmul::gemm_geometry(config, shape.at(0), cols, dtype);
}

LaunchGeometry first_phase_geometry(const std::map<std::string, int64_t>& config, const std::vector<int64_t>& shape,
                                    DType dtype) {
  return phase_geometry(config, shape, dtype, 0);
}

// G [M, F], then Hd [M, F] from a 128-element boundary (fused_mlp.cu).
int64_t workspace_bytes(const std::vector<int64_t>& shape, DType dtype) {
  const int64_t mf = shape.at(0) * shape.at(2);
  return ((mf + 127) / 128 * 128 + mf) * int64_t(dtype_bytes(dtype));
}

// matmul's constraints, and fused_mlp.cu's on AK_GATEUP.
std::string config_error(const std::map<std::string, int64_t>& config, DType dtype) {
  std::string e = matmul::gemm_config_error(config, dtype);
  if (!e.empty()) return e;
  auto it = config.find("AK_GATEUP");
  if (it == config.end() || it->second == 0) return "";
  if (it->second != 1) return "AK_GATEUP must be 0 or 1";
  static const std::vector<Tunable> space = cuda_space();
  if (dtype == DType::kF32 || config_value(config, space, "AK_WGMMA", 0) < 2 ||
      config_value(config, space, "AK_BN", 128) < 128)
    return "AK_GATEUP=1 needs fp16/bf16, matmul's TMA path (AK_WGMMA=2 or 3) and AK_BN 128 or 256";
  return "";
}

// The TMA paths (AK_WGMMA=2 and 3): each phase's GEMM reads its A and B through two maps, keyed as
// fused_mlp.cu's gemm_tile looks them up (A's and B's addresses, then M, N, K of that GEMM).
// Inputs: x 0, Wg 1, Wu 2, Wd 3; phase 2's A is Hd in the workspace, after G.
PhaseTensorMaps phase_tensor_maps(const std::map<std::string, int64_t>& config, const std::vector<int64_t>& shape,
                                  DType dtype, int phase) {
  const int64_t m = shape.at(0), h = shape.at(1), f = shape.at(2);
  if (phase == 2) {
    const uint64_t hd = uint64_t((m * f + 127) / 128 * 128);  // fused_mlp.cu: h = g + that
    return {matmul::gemm_tensor_maps(config, uint64_t(m), uint64_t(h), uint64_t(f), dtype, -2, hd, 3), {m, h, f}};
  }
  return {matmul::gemm_tensor_maps(config, uint64_t(m), uint64_t(f), uint64_t(h), dtype, 0, 0, phase == 0 ? 1 : 2),
          {m, f, h}};
}

}  // namespace

KernelSpec make_spec() {
  KernelSpec k;
  k.name = "fused_mlp";
  k.dtypes = {DType::kF32, DType::kF16, DType::kBF16};
  // LLaMA-7B (H 4096, F 11008) and Llama-3-8B (H 4096, F 14336) MLPs at 4096 and 2048 tokens, a
  // small model's (H 1024, F 2816), and sizes no tile divides.
  k.backends[Backend::kCuda] = BackendSource{
      std::string(kCudaSource),
      "ak_fused_mlp",
      cuda_space(),
      {{4096, 4096, 11008}, {2048, 4096, 14336}, {512, 1024, 2816}, {1000, 1023, 1025}},
      // fp32 (SIMT): 2 x 4 warps, as matmul.
      {{DType::kF32, {{"AK_WARPS_N", 4}}}},
  };
  // README.md, fp16/bf16 on Hopper: the gate/up GEMM on matmul's TMA paths, ping-pong 64x256 (1.04-
  // 1.08x eager at the LLM shapes on an H100, 2026-12-07 and 12-08) and cooperative 128x256; then
  // the three GEMMs on the TMA path.
  k.backends[Backend::kCuda].starts = {
      {{"AK_WARPS_M", 2},
       {"AK_WARPS_N", 4},
       {"AK_BM", 64},
       {"AK_BN", 256},
       {"AK_BK", 64},
       {"AK_STAGES", 5},
       {"AK_WGMMA", 3},
       {"AK_MAX_BLOCKS", 132},
       {"AK_GATEUP", 1}},
      {{"AK_WARPS_M", 2},
       {"AK_WARPS_N", 4},
       {"AK_BN", 256},
       {"AK_BK", 64},
       {"AK_STAGES", 4},
       {"AK_WGMMA", 2},
       {"AK_MAX_BLOCKS", 132},
       {"AK_GATEUP", 1}},
      {{"AK_WARPS_M", 2},
       {"AK_WARPS_N", 4},
       {"AK_BN", 256},
       {"AK_BK", 64},
       {"AK_STAGES", 4},
       {"AK_WGMMA", 2},
       {"AK_MAX_BLOCKS", 132}},
  };
  // Checked as |out - ref| <= atol * scale + rtol * |ref| with the harness's tolerance_scale
  // (kernels/fused_mlp/reference.cc): the first-order size of storing g, u and h in the dtype,
  // (|silu'(g) g u| + 2 |h|) @ |Wd|, plus the GEMMs' fp32 accumulation error. atol: the dtype's
  // unit roundoff (fp16 2^-11, bf16 2^-8) with a factor of 4 for the roundings PyTorch's sequence
  // adds; fp32 as matmul's. rtol: the output's own rounding.
  k.tolerance = {
      {DType::kF32, {2e-5, 1e-6}},
      {DType::kF16, {2e-3, 2e-3}},
      {DType::kBF16, {1.6e-2, 1.6e-2}},
  };
  k.flops = flops;
  k.bytes = bytes;
  k.check_shape = check_shape;
  k.cuda_geometry = first_phase_geometry;
  k.cuda_config_error = config_error;
  // Static shared memory: matmul's (its GEMMs are matmul.cu's), the TMA paths' mbarriers padded to
  // 1024 B.
  k.cuda_static_shared_bytes = 1024;
  k.cuda_phases = 3;
  k.cuda_phase_geometry = phase_geometry;
  k.cuda_phase_tensor_maps = phase_tensor_maps;
  k.workspace_bytes = workspace_bytes;
  k.edge_shapes = {{1, 1, 1}, {127, 1, 1}, {1, 127, 1}, {1, 1, 127}, {3, 1023, 5}, {129, 257, 65}, {17, 33, 4097}};
  return k;
}

}  // namespace ak::kernels::fused_mlp
