// libtorch side of fused_mlp: inputs (x ~ N(0, 1), weights N(0, 1 / fan_in) as an initialised
// layer has), the fp64 reference, PyTorch eager's sequence as the baseline (cuBLAS for the three
// GEMMs, silu and mul between them), the tolerance scale and the hostile inputs.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "kernels/reference.h"
#include "kernels/registry.h"
#include "kernels/torch_inputs.h"

namespace ak::kernels::fused_mlp {
namespace {

at::Tensor weight(int64_t rows, int64_t cols, DType dtype, c10::Device device) {
  auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  return (at::randn({rows, cols}, opts) / std::sqrt(double(rows))).to(torch_dtype(dtype)).contiguous();
}

std::vector<at::Tensor> weights(int64_t h, int64_t f, DType dtype, c10::Device device) {
  at::Tensor wg = weight(h, f, dtype, device);
  at::Tensor wu = weight(h, f, dtype, device);
  at::Tensor wd = weight(f, h, dtype, device);
  return {wg, wu, wd};
}

std::vector<at::Tensor> make_inputs(const std::vector<int64_t>& shape, DType dtype, c10::Device device,
                                    uint64_t seed) {
  at::manual_seed(seed);
  const int64_t m = shape.at(0), h = shape.at(1), f = shape.at(2);
  auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  std::vector<at::Tensor> in = {at::randn({m, h}, opts).to(torch_dtype(dtype)).contiguous()};
  for (at::Tensor& w : weights(h, f, dtype, device)) in.push_back(w);
  return in;
}

at::Tensor make_output(const std::vector<at::Tensor>& inputs) { return at::empty_like(inputs.at(0)); }

struct Wide {
  at::Tensor x, wg, wu, wd;
};
Wide wide(const std::vector<at::Tensor>& inputs) {
  return {inputs.at(0).to(at::kDouble), inputs.at(1).to(at::kDouble), inputs.at(2).to(at::kDouble),
          inputs.at(3).to(at::kDouble)};
}

// fp64 throughout, rounded to the job's dtype, returned as fp32.
at::Tensor reference(const std::vector<at::Tensor>& inputs) {
  const Wide w = wide(inputs);
  at::Tensor g = at::mm(w.x, w.wg);
  at::Tensor hd = g * at::sigmoid(g) * at::mm(w.x, w.wu);
  return at::mm(hd, w.wd).to(inputs.at(0).scalar_type()).to(at::kFloat);
}

// PyTorch eager: three cuBLAS GEMMs, silu and mul in place between them.
void baseline(const std::vector<at::Tensor>& inputs, at::Tensor& out) {
  at::Tensor g = at::mm(inputs.at(0), inputs.at(1));
  at::Tensor u = at::mm(inputs.at(0), inputs.at(2));
  at::silu_(g);
  g.mul_(u);
  at::mm_out(out, g, inputs.at(3));
}

// First-order size of the roundings. Storing g, u and h in the dtype moves the output by
// silu'(g) u e_g, silu(g) e_u and e_h through Wd, with |e| <= eps |value|: the term
// |silu'(g) g u| + 2 |h|, times |Wd|. The GEMMs' fp32 accumulation errors scale with the sums of
// |terms| (|x| @ |W|, as matmul's tolerance): they enter with a weight that makes them
// 2e-5 * (|x| @ |W|) whatever the dtype's atol (kernels/fused_mlp/spec.cc).
at::Tensor tolerance_scale(const std::vector<at::Tensor>& inputs, const Tolerance& tolerance) {
  const Wide w = wide(inputs);
  const double gemm_weight = 2e-5 / tolerance.atol;
  at::Tensor ax = w.x.abs();
  at::Tensor g = at::mm(w.x, w.wg);
  at::Tensor u = at::mm(w.x, w.wu);
  at::Tensor sig = at::sigmoid(g);
  at::Tensor silu = g * sig;
  at::Tensor dsilu = (sig * (1 + g * (1 - sig))).abs();
  at::Tensor h = (silu * u).abs();
  at::Tensor rounding = dsilu * (g * u).abs() + 2 * h;
  at::Tensor gemm = dsilu * u.abs() * at::mm(ax, w.wg.abs()) + silu.abs() * at::mm(ax, w.wu.abs()) + h;
  return (at::mm(rounding + gemm_weight * gemm, w.wd.abs())).to(at::kFloat);
}

void cuda_params(const std::vector<at::Tensor>& inputs, at::Tensor& out, KernelParams& params) {
  for (size_t i = 0; i < 4; ++i) params.add_pointer(inputs.at(i).const_data_ptr());
  params.add_pointer(out.mutable_data_ptr());
  params.add_i64(inputs.at(0).size(0));
  params.add_i64(inputs.at(0).size(1));
  params.add_i64(inputs.at(1).size(1));
}

// Hostile x with real weights. The output is quadratic in x, so the row-wise sets do not carry
// over: near_max scales x until an intermediate (x @ W, silu(g) * u, the output, or a term of the
// tolerance scale) reaches 1/16 of the dtype's maximum; near_zero puts silu(g) * u near 1e-3, and
// mixed_scales spans row scales 0.1 .. 10 (1e-2 .. 1e2 in the intermediate): below fp16's
// smallest normal (6.1e-5) the intermediate underflows in any implementation that stores it in
// fp16, PyTorch's eager sequence included, and above 1e4 the output overflows. +-inf and NaN
// have no agreed result here (inf - inf in a dot product, silu(-inf)) and are left out; all_zeros
// must give exact zeros.
std::vector<HostileCase> hostile_inputs(const std::vector<int64_t>& shape, DType dtype, c10::Device device,
                                        uint64_t seed) {
  at::manual_seed(seed ^ 0xf00d);
  const int64_t m = shape.at(0), h = shape.at(1), f = shape.at(2);
  const std::vector<at::Tensor> ws = weights(h, f, dtype, device);
  const at::ScalarType st = torch_dtype(dtype);
  auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
  at::Tensor noise = at::randn({m, h}, f32);
  auto with_w = [&](const at::Tensor& x) {
    std::vector<at::Tensor> in = {x.to(st).contiguous()};
    in.insert(in.end(), ws.begin(), ws.end());
    return in;
  };
  std::vector<HostileCase> cases;
  {
    // Largest intermediate at x = the signed ones: g and u scale with s, the rest with s^2.
    at::Tensor x = at::where(at::rand({m, h}, f32) < 0.5, at::ones({m, h}, f32), -at::ones({m, h}, f32));
    std::vector<at::Tensor> in = with_w(x);
    const Wide w = wide(in);
    at::Tensor g = at::mm(w.x, w.wg), u = at::mm(w.x, w.wu);
    const double lin = std::max(g.abs().max().item<double>(), u.abs().max().item<double>());
    const double quad = std::max({(g.abs() * u.abs()).max().item<double>(),
                                  at::mm(g.abs() * u.abs(), w.wd.abs()).max().item<double>(),
                                  at::mm(at::mm(w.x.abs(), w.wg.abs()) * u.abs() * 2, w.wd.abs()).max().item<double>()});
    const double limit = dtype_max(dtype) / 16;
    const double s = std::min(limit / std::max(lin, 1e-300), std::sqrt(limit / std::max(quad, 1e-300)));
    cases.push_back({"near_max", with_w(x * s)});
  }
  cases.push_back({"near_zero", with_w(noise * 0.05)});
  {
    at::Tensor scale = at::pow(10.0, at::linspace(-1.0, 1.0, m, f32)).reshape({m, 1});
    cases.push_back({"mixed_scales", with_w(noise * scale)});
  }
  cases.push_back({"all_zeros", with_w(at::zeros({m, h}, f32))});
  cases.push_back({"all_equal", with_w(at::full({m, h}, 0.75, f32))});
  return cases;
}

}  // namespace

extern const TorchHarness kHarness = {make_inputs, make_output, reference,      baseline,
                                      nullptr,     cuda_params, hostile_inputs, tolerance_scale};

}  // namespace ak::kernels::fused_mlp
