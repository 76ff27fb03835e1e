#include "kernels/registry.h"

#include <cctype>

#include <algorithm>
#include <stdexcept>

namespace ak::kernels {

// One line per kernel type: its folder defines make_spec().
namespace softmax { KernelSpec make_spec(); }
namespace reduce {
KernelSpec make_sum_spec();
KernelSpec make_max_spec();
}  // namespace reduce
namespace rmsnorm {
KernelSpec make_spec();
KernelSpec make_e5_spec();
}  // namespace rmsnorm
namespace layernorm {
KernelSpec make_spec();
KernelSpec make_e12_spec();
KernelSpec make_e6_spec();
}  // namespace layernorm
namespace cross_entropy { KernelSpec make_spec(); }
namespace rotary_embedding { KernelSpec make_spec(); }
namespace matmul { KernelSpec make_spec(); }
namespace flash_attention {
KernelSpec make_spec();
KernelSpec make_causal_spec();
}  // namespace flash_attention
namespace fused_mlp { KernelSpec make_spec(); }

namespace {

const std::vector<KernelSpec>& table() {
  static const std::vector<KernelSpec> specs = {
      softmax::make_spec(),
      reduce::make_sum_spec(),
      reduce::make_max_spec(),
      rmsnorm::make_spec(),
      rmsnorm::make_e5_spec(),
      layernorm::make_spec(),
      layernorm::make_e12_spec(),
      layernorm::make_e6_spec(),
      cross_entropy::make_spec(),
      rotary_embedding::make_spec(),
      matmul::make_spec(),
      flash_attention::make_spec(),
      flash_attention::make_causal_spec(),
      fused_mlp::make_spec(),
  };
  return specs;
}

}  // namespace

std::vector<PhaseTensorMaps> tensor_map_groups(const KernelSpec& spec, const std::map<std::string, int64_t>& config,
                                               const std::vector<int64_t>& shape, DType dtype) {
  std::vector<PhaseTensorMaps> out;
  if (spec.cuda_phases > 1) {
    for (int p = 0; p < spec.cuda_phases; ++p)
      out.push_back(spec.cuda_phase_tensor_maps ? spec.cuda_phase_tensor_maps(config, shape, dtype, p)
                                                : PhaseTensorMaps{});
  } else {
    out.push_back(
        {spec.cuda_tensor_maps ? spec.cuda_tensor_maps(config, shape, dtype) : std::vector<TensorMapSpec>{}, shape});
  }
  return out;
}

bool reads_tensor_maps(const KernelSpec& spec, const std::map<std::string, int64_t>& config,
                       const std::vector<int64_t>& shape, DType dtype) {
  for (const PhaseTensorMaps& g : tensor_map_groups(spec, config, shape, dtype))
    if (!g.maps.empty()) return true;
  return false;
}

const KernelSpec* find(std::string_view name) {
  for (const KernelSpec& k : table())
    if (k.name == name) return &k;
  return nullptr;
}

std::vector<const KernelSpec*> all() {
  std::vector<const KernelSpec*> out;
  for (const KernelSpec& k : table()) out.push_back(&k);
  return out;
}

std::string type_names() {
  std::string out;
  for (const KernelSpec* k : all()) out += (out.empty() ? "" : ", ") + k->name;
  return out;
}

KernelSpec with_eps(KernelSpec base, std::string name, std::string_view from, std::string_view to) {
  // The literal as a whole number: not inside 21e-5 or 1e-50 (a suffix such as 1e-5f is fine).
  const auto part_of_number = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_';
  };
  for (auto& [backend, src] : base.backends) {
    std::string& s = src.source;
    int replaced = 0;
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + 1)) {
      const size_t end = at + from.size();
      if ((at > 0 && part_of_number(s[at - 1])) || (end < s.size() && std::isdigit(static_cast<unsigned char>(s[end]))))
        continue;
      s.replace(at, from.size(), to);
      at += to.size() - 1;
      ++replaced;
    }
    if (replaced == 0)
      throw std::logic_error(name + ": the " + base.name + " source has no eps literal " + std::string(from));
  }
  if (base.family.empty()) base.family = base.name;
  base.name = std::move(name);
  return base;
}

std::vector<std::map<std::string, int64_t>> enumerate_space(const std::vector<Tunable>& space) {
  std::vector<std::map<std::string, int64_t>> out;
  for (const Tunable& t : space)
    if (t.values.empty()) return out;
  // odometer over the value lists; the last tunable varies fastest
  std::vector<size_t> idx(space.size(), 0);
  while (true) {
    std::map<std::string, int64_t> c;
    for (size_t i = 0; i < space.size(); ++i) c[space[i].name] = space[i].values[idx[i]];
    out.push_back(std::move(c));
    size_t i = space.size();
    while (i > 0) {
      --i;
      if (++idx[i] < space[i].values.size()) break;
      idx[i] = 0;
      if (i == 0) return out;
    }
    if (space.empty()) return out;
  }
}

std::map<std::string, int64_t> default_config(const std::vector<Tunable>& space) {
  std::map<std::string, int64_t> c;
  for (const Tunable& t : space) c[t.name] = t.default_value;
  return c;
}

std::map<std::string, int64_t> default_config(const BackendSource& source, DType dtype) {
  std::map<std::string, int64_t> c = default_config(source.space);
  if (auto it = source.dtype_defaults.find(dtype); it != source.dtype_defaults.end())
    for (const auto& [name, value] : it->second) c[name] = value;
  return c;
}

std::map<std::string, int64_t> complete_config(const BackendSource& source, DType dtype,
                                               const std::map<std::string, int64_t>& given,
                                               std::string (*config_error)(const std::map<std::string, int64_t>&,
                                                                           DType)) {
  auto over = [&](std::map<std::string, int64_t> c) {
    for (const auto& [name, value] : given) c[name] = value;
    return c;
  };
  std::map<std::string, int64_t> with_dtype = over(default_config(source, dtype));
  if (!config_error || config_error(with_dtype, dtype).empty()) return with_dtype;
  std::map<std::string, int64_t> plain = over(default_config(source.space));
  return config_error(plain, dtype).empty() ? plain : with_dtype;
}

int64_t config_value(const std::map<std::string, int64_t>& config, const std::vector<Tunable>& space,
                     const std::string& name, int64_t fallback) {
  if (auto it = config.find(name); it != config.end()) return it->second;
  for (const Tunable& t : space)
    if (t.name == name) return t.default_value;
  return fallback;
}

std::string check_rows_cols(const std::string& type, const std::vector<int64_t>& shape) {
  if (shape.size() != 2)
    return type + " needs a [rows, cols] shape; got " + std::to_string(shape.size()) + " dims";
  if (shape[0] < 1 || shape[1] < 1)
    return type + " needs rows >= 1 and cols >= 1; got " + std::to_string(shape[0]) + "x" + std::to_string(shape[1]);
  if (shape[1] > (int64_t{1} << 31)) return type + " supports cols <= 2^31";
  return "";
}

LaunchGeometry row_geometry(const std::map<std::string, int64_t>& config, const std::vector<Tunable>& space,
                            const std::vector<int64_t>& shape) {
  const int64_t threads = config_value(config, space, "AK_THREADS", 256);
  const bool warp_per_row = config_value(config, space, "AK_WARP_PER_ROW", 0) != 0;
  const int64_t rows = shape.at(0);
  const int64_t rows_per_block = warp_per_row ? std::max<int64_t>(1, threads / 32) : 1;
  const int64_t blocks = std::min<int64_t>((rows + rows_per_block - 1) / rows_per_block, 0x7fffffff);
  LaunchGeometry g;
  g.grid[0] = unsigned(blocks);
  g.block[0] = unsigned(threads);
  return g;
}

std::vector<Tunable> row_cuda_space(int64_t threads_default, std::vector<int64_t> vec_values, int64_t vec_default) {
  return {
      {"AK_THREADS", {128, 256, 512, 1024}, threads_default},
      {"AK_VEC", std::move(vec_values), vec_default},
      {"AK_WARP_PER_ROW", {0, 1}, 0},
  };
}

std::vector<Tunable> row_cpu_space() { return {{"AK_VEC", {1, 4, 8, 16}, 8}}; }

std::vector<Tunable> row_triton_space(std::vector<int64_t> blocks, int64_t block_default, int64_t warps_default) {
  return {
      {"BLOCK", std::move(blocks), block_default},
      {"AK_NUM_WARPS", {4, 8, 16}, warps_default},
      {"AK_NUM_STAGES", {1, 2}, 1},
  };
}

std::vector<std::vector<int64_t>> row_edge_shapes() {
  return {{1, 1}, {1, 127}, {127, 1}, {3, 1023}, {2, 4097}, {1, 65537}, {129, 257}};
}

LaunchGeometry one_program_per_row(const std::map<std::string, int64_t>&, const std::vector<int64_t>& shape, DType) {
  LaunchGeometry g;
  g.grid[0] = unsigned(std::clamp<int64_t>(shape.at(0), 1, 0x7fffffff));
  return g;
}

}  // namespace ak::kernels
