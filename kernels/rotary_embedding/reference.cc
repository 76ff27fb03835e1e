// libtorch side of rotary_embedding: inputs (x and real cos/sin tables), the fp64 reference, the
// eager baseline in the job's dtype (the rotate-half code of Hugging Face's LLaMA), the tolerance
// scale and the calling conventions of kernels/rotary_embedding/spec.cc.
#include <ATen/ATen.h>

#include "kernels/reference.h"
#include "kernels/torch_inputs.h"

namespace ak::kernels::rotary_embedding {
namespace {

// cos and sin of t * 10000^(-2i / dim) for token t and pair i, computed in fp64 and stored in the
// job's dtype, [tokens, dim / 2], as a model precomputes them.
std::vector<at::Tensor> tables(int64_t tokens, int64_t dim, DType dtype, c10::Device device) {
  auto f64 = at::TensorOptions().dtype(at::kDouble).device(device);
  at::Tensor inv_freq = at::pow(10000.0, -at::arange(0, dim / 2, f64) * (2.0 / double(dim)));
  at::Tensor angle = at::outer(at::arange(tokens, f64), inv_freq);
  const at::ScalarType st = torch_dtype(dtype);
  return {at::cos(angle).to(st).contiguous(), at::sin(angle).to(st).contiguous()};
}

std::vector<at::Tensor> make_inputs(const std::vector<int64_t>& shape, DType dtype, c10::Device device,
                                    uint64_t seed) {
  at::manual_seed(seed);
  auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  at::Tensor x = at::randn({shape.at(0), shape.at(1), shape.at(2)}, opts);
  std::vector<at::Tensor> in = {x.to(torch_dtype(dtype)).contiguous()};
  for (at::Tensor& t : tables(shape.at(0), shape.at(2), dtype, device)) in.push_back(t);
  return in;
}

at::Tensor make_output(const std::vector<at::Tensor>& inputs) { return at::empty_like(inputs.at(0)); }

// The halves of x and the tables broadcast over heads: [tokens, 1, h].
struct Parts {
  at::Tensor x1, x2, c, s;
};
Parts parts(const std::vector<at::Tensor>& inputs, at::ScalarType st) {
  const at::Tensor x = inputs.at(0).to(st);
  const int64_t h = x.size(2) / 2;
  return {x.narrow(2, 0, h), x.narrow(2, h, h), inputs.at(1).to(st).unsqueeze(1), inputs.at(2).to(st).unsqueeze(1)};
}

// fp64, rounded to the job's dtype, returned as fp32.
at::Tensor reference(const std::vector<at::Tensor>& inputs) {
  const Parts p = parts(inputs, at::kDouble);
  return at::cat({p.x1 * p.c - p.x2 * p.s, p.x2 * p.c + p.x1 * p.s}, 2).to(inputs.at(0).scalar_type()).to(at::kFloat);
}

// The eager code of a model (x * cos + rotate_half(x) * sin with full-width tables), in the job's
// dtype; it allocates its result, as eager code does, and `out` is left alone.
void baseline(const std::vector<at::Tensor>& inputs, at::Tensor&) {
  const at::Tensor& x = inputs.at(0);
  const int64_t h = x.size(2) / 2;
  const at::Tensor c = at::cat({inputs.at(1), inputs.at(1)}, 1).unsqueeze(1);
  const at::Tensor s = at::cat({inputs.at(2), inputs.at(2)}, 1).unsqueeze(1);
  const at::Tensor rotated = at::cat({-x.narrow(2, h, h), x.narrow(2, 0, h)}, 2);
  (void)(x * c + rotated * s);
}

at::Tensor tolerance_scale(const std::vector<at::Tensor>& inputs, const Tolerance&) {
  const Parts p = parts(inputs, at::kDouble);
  return at::cat({(p.x1 * p.c).abs() + (p.x2 * p.s).abs(), (p.x2 * p.c).abs() + (p.x1 * p.s).abs()}, 2)
      .to(at::kFloat);
}

// The row-wise hostile sets on x seen as [tokens * heads, dim], with magnitudes near half the
// dtype's maximum at most: a rotation grows an element by up to sqrt(2), so values nearer the max
// overflow for any implementation and the reference alike, and whether an element just at the
// threshold rounds to inf or to the max depends on the order of the two products.
std::vector<HostileCase> hostile_inputs(const std::vector<int64_t>& shape, DType dtype, c10::Device device,
                                        uint64_t seed) {
  std::vector<HostileCase> cases =
      bounded_hostile_inputs({shape.at(0) * shape.at(1), shape.at(2)}, dtype, device, seed, dtype_max(dtype) / 2);
  for (HostileCase& c : cases) c.inputs[0] = c.inputs[0].reshape({shape.at(0), shape.at(1), shape.at(2)});
  return with_params(std::move(cases), tables(shape.at(0), shape.at(2), dtype, device));
}

}  // namespace

extern const TorchHarness kHarness =
    inputs_out_dims_harness(make_inputs, make_output, reference, baseline, hostile_inputs, tolerance_scale);

}  // namespace ak::kernels::rotary_embedding
