// The rotary_embedding kernel type: rotary position embedding of x [tokens, heads, dim] with
// cos and sin tables [tokens, dim / 2] of the model's angles, rotate-half convention
// (GPT-NeoX, LLaMA): y[..., :h] = x1 * cos - x2 * sin, y[..., h:] = x2 * cos + x1 * sin.
//
// cpu entry:  extern "C" int ak_rotary_embedding_cpu(const void* x, const void* cos,
//                 const void* sin, void* y, int64_t tokens, int64_t heads, int64_t dim, int dtype)
// cuda entry: extern "C" __global__ void ak_rotary_embedding(const void* x, const void* cos,
//                 const void* sin, void* y, long long tokens, long long heads, long long dim)
// See rotary_embedding_cpu.cc and rotary_embedding.cu for the tunables.
#include <algorithm>
#include <string>

#include "kernels/registry.h"
#include "kernels/rotary_embedding/sources.h"

namespace ak::kernels::rotary_embedding {
namespace {

double elements(const std::vector<int64_t>& shape) { return double(shape.at(0)) * double(shape.at(1)) * double(shape.at(2)); }

double flops(const std::vector<int64_t>& shape) {
  // per pair: four multiplies and two adds
  return 3.0 * elements(shape);
}

double bytes(const std::vector<int64_t>& shape, DType dtype) {
  // x read once, y written once, the two tables read once
  return (2.0 * elements(shape) + double(shape.at(0)) * double(shape.at(2))) * dtype_bytes(dtype);
}

std::string check_shape(const std::vector<int64_t>& shape) {
  if (shape.size() != 3)
    return "rotary_embedding needs a [tokens, heads, dim] shape; got " + std::to_string(shape.size()) + " dims";
  if (shape[0] < 1 || shape[1] < 1 || shape[2] < 2 || shape[2] % 2 != 0)
    return "rotary_embedding needs tokens >= 1, heads >= 1 and an even dim >= 2";
  if (shape[2] > (int64_t{1} << 31)) return "rotary_embedding supports dim <= 2^31";
  return "";
}

std::vector<Tunable> cuda_space() {
  return {
      {"AK_THREADS", {128, 256, 512, 1024}, 256},
      {"AK_VEC", {1, 2, 4, 8}, 8},
  };
}

LaunchGeometry cuda_geometry(const std::map<std::string, int64_t>& config, const std::vector<int64_t>& shape,
                             DType) {
  static const std::vector<Tunable> space = cuda_space();
  const int64_t threads = config_value(config, space, "AK_THREADS", 256);
  const int64_t vec = config_value(config, space, "AK_VEC", 8);
  const int64_t items = shape.at(0) * shape.at(1) * (shape.at(2) / 2);
  const int64_t per_block = threads * vec;
  LaunchGeometry g;
  g.grid[0] = unsigned(std::clamp<int64_t>((items + per_block - 1) / per_block, 1, 0x7fffffff));
  g.block[0] = unsigned(threads);
  return g;
}

std::string triton_signature(DType d) {
  const std::string t = dtype_name(d);
  return "x_ptr:*" + t + ",cos_ptr:*" + t + ",sin_ptr:*" + t + ",y_ptr:*" + t + ",tokens:i64,heads:i64,dim:i64";
}

// rotary_embedding.py: one program per (token, head) row.
LaunchGeometry triton_grid(const std::map<std::string, int64_t>&, const std::vector<int64_t>& shape, DType) {
  LaunchGeometry g;
  g.grid[0] = unsigned(std::clamp<int64_t>(shape.at(0) * shape.at(1), 1, 0x7fffffff));
  return g;
}

}  // namespace

KernelSpec make_spec() {
  KernelSpec k;
  k.name = "rotary_embedding";
  k.dtypes = {DType::kF32, DType::kF16, DType::kBF16};
  k.backends[Backend::kCpu] = BackendSource{
      std::string(kCpuSource),
      "ak_rotary_embedding_cpu",
      {{"AK_HEADS_PER_STEP", {1, 4, 8}, 4}},
      {{64, 8, 64}, {256, 4, 128}, {100, 3, 32}},
  };
  // LLaMA-7B/70B query shapes (32 or 64 heads of 128) at 4k and 8k tokens; 8 KV heads of 64.
  k.backends[Backend::kCuda] = BackendSource{
      std::string(kCudaSource),
      "ak_rotary_embedding",
      cuda_space(),
      {{4096, 32, 128}, {8192, 32, 128}, {8192, 8, 64}, {1000, 3, 62}},
  };
  k.backends[Backend::kTriton] = BackendSource{
      std::string(kTritonSource),
      "rotary_kernel",
      {
          {"BLOCK", {16, 32, 64}, 64},
          {"AK_NUM_WARPS", {1, 2, 4}, 2},
          {"AK_NUM_STAGES", {1, 2}, 1},
      },
      {{4096, 32, 128}, {8192, 32, 128}, {8192, 8, 64}, {1000, 3, 62}},
  };
  k.triton_grid = triton_grid;
  k.triton_signature = triton_signature;
  k.triton_divisible = {"x_ptr", "cos_ptr", "sin_ptr", "y_ptr", "dim"};
  // Checked as |out - ref| <= atol * (|x1 c| + |x2 s|) + rtol * |ref| (the harness's
  // tolerance_scale): the two products of a rotated element may cancel, so its rounding error is
  // held to the size of the products. atol: fp32 products and one fused add (a few 2^-24);
  // rtol: one rounding of the output to the dtype, and the reference's own.
  k.tolerance = {
      {DType::kF32, {1e-6, 1e-6}},
      {DType::kF16, {1e-6, 2e-3}},
      {DType::kBF16, {1e-6, 1.6e-2}},
  };
  k.flops = flops;
  k.bytes = bytes;
  k.check_shape = check_shape;
  k.cuda_geometry = cuda_geometry;
  k.edge_shapes = {{1, 1, 2}, {127, 1, 64}, {3, 7, 126}, {1, 1, 4098}, {129, 5, 18}, {5, 3, 130}};
  return k;
}

}  // namespace ak::kernels::rotary_embedding
