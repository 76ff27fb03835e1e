// libtorch side of flash_attention and flash_attention_causal: inputs, the fp64 references
// (PyTorch's math attention), the baselines in the job's dtype (at::scaled_dot_product_attention),
// the tolerance scale P @ |v|, the hostile sets and the calling convention of
// kernels/flash_attention/spec.cc.
#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <tuple>

#include "kernels/reference.h"
#include "kernels/registry.h"
#include "kernels/torch_inputs.h"

namespace ak::kernels::flash_attention {
namespace {

std::vector<int64_t> dims(const std::vector<int64_t>& shape) {
  return {shape.at(0), shape.at(1), shape.at(2), shape.at(3)};
}

std::vector<at::Tensor> make_inputs(const std::vector<int64_t>& shape, DType dtype, c10::Device device,
                                    uint64_t seed) {
  at::manual_seed(seed);
  auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
  std::vector<at::Tensor> in;
  for (int i = 0; i < 3; ++i) in.push_back(at::randn(dims(shape), opts).to(torch_dtype(dtype)).contiguous());
  return in;  // q, k, v
}

at::Tensor make_output(const std::vector<at::Tensor>& inputs) {
  return at::empty(inputs.at(0).sizes(), inputs.at(0).options());
}

// Attention in fp64 by PyTorch's math path (q k^T, softmax, then @ v, each materialised), which
// at::scaled_dot_product_attention also takes for fp64 on the GPU; named outright so that the NaN
// semantics the hostile sets rely on (those of the plain formula) cannot change with the backend
// PyTorch picks.
at::Tensor attention_fp64(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal) {
  return std::get<0>(at::_scaled_dot_product_attention_math(q.to(at::kDouble), k.to(at::kDouble),
                                                            v.to(at::kDouble), {}, 0.0, causal));
}

// fp64, rounded to the job's dtype, returned as fp32. A (batch, head) at a time: each head's
// attention is its own, and the math path materialises its [seq, seq] scores several times over
// (at 1x32x8192 the whole batch's at once would be tens of GiB in fp64).
template <bool kCausal>
at::Tensor reference(const std::vector<at::Tensor>& inputs) {
  const at::Tensor &q = inputs.at(0), &k = inputs.at(1), &v = inputs.at(2);
  at::Tensor out = at::empty({q.size(0), q.size(1), q.size(2), v.size(3)}, q.options().dtype(at::kFloat));
  for (int64_t b = 0; b < q.size(0); ++b)
    for (int64_t h = 0; h < q.size(1); ++h) {
      auto head = [&](const at::Tensor& x) { return x.narrow(0, b, 1).narrow(1, h, 1); };
      head(out).copy_(attention_fp64(head(q), head(k), head(v), kCausal).to(q.scalar_type()));
    }
  return out;
}

// The tolerance scale: the attention weights P applied to |v|, the size of the terms each output
// sums, computed as the math reference computes P (the causal mask added as -inf, so that a NaN
// score stays NaN and +inf becomes NaN; softmax in fp64, a row of -inf only giving weights 0 as
// at::_safe_softmax does), so that it is NaN exactly where that reference is.
//
// For fp16, plus what rounding the unnormalised weights u = exp(s - max) (in (0, 1]) to fp16
// before the P @ V product may cost a kernel's output where P @ |v| cannot pay for it: below
// fp16's smallest normal 2^-14 a weight's rounding error is absolute, at most min(u, 2^-25) (half a
// subnormal step, or the whole weight where it rounds to zero), so the output may be off by
// sum_j min(u_j, 2^-25) |v_j| / l, l = sum_j u_j, however small the weights' share of P @ |v|
// (512 keys of weight 2^-20 on v = 1 put it at 3% of the output). That cost is divided by
// `fp16_atol`, the atol the scale is multiplied by; NaN there (a NaN input's row or head, whose
// reference is NaN anyway) counts as 0.
//
// In fp64, a (batch, head) at a time, in place where it can be: at seq 8192 a [seq, seq] matrix is
// 512 MiB (two of them for fp16), where the whole batch's at once (32 heads) would be 16 GiB each.
at::Tensor weights_on_abs_v(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                            double fp16_atol) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const int64_t batch = q.size(0), heads = q.size(1), seq = q.size(2);
  const double scale = 1.0 / std::sqrt(double(q.size(3)));
  at::Tensor out = at::empty({batch, heads, seq, v.size(3)}, q.options().dtype(at::kDouble));
  at::Tensor above;
  if (causal) above = at::ones({seq, seq}, q.options().dtype(at::kBool)).triu(1);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      at::Tensor s = at::matmul(q[b][h].to(at::kDouble), k[b][h].to(at::kDouble).transpose(0, 1)).mul_(scale);
      if (causal) {  // s + (-inf) above the diagonal, with bool masks (an eighth of a double one each)
        s.masked_fill_(above.logical_and(s.eq(kInf)), std::nan(""));
        s.masked_fill_(above.logical_and(s.isnan().logical_not()), -kInf);
      }
      at::Tensor m = std::get<0>(s.max(1, /*keepdim=*/true));
      m.masked_fill_(m.eq(-kInf), 0.0);
      at::Tensor u = s.sub_(m).exp_();  // s is spent
      const at::Tensor l = u.sum(1, /*keepdim=*/true);
      at::Tensor err;
      if (fp16_atol > 0)
        err = u.clamp_max(0x1p-25).masked_fill_(u >= 0x1p-14, 0.0).div_(l).div_(fp16_atol).nan_to_num_(0.0, 0.0, 0.0);
      at::Tensor w = u.div_(l).masked_fill_(l.eq(0.0), 0.0);  // u is spent
      if (err.defined()) w.add_(err);
      out[b][h].copy_(at::matmul(w, v[b][h].to(at::kDouble).abs()));
    }
  return out;
}

template <bool kCausal>
at::Tensor tolerance_scale(const std::vector<at::Tensor>& inputs, const Tolerance& tolerance) {
  const at::Tensor &q = inputs.at(0), &k = inputs.at(1), &v = inputs.at(2);
  const double fp16_atol = q.scalar_type() == at::kHalf ? tolerance.atol : 0.0;
  return weights_on_abs_v(q, k, v, kCausal, fp16_atol).to(at::kFloat);
}

// PyTorch's fused attention in the job's dtype (the flash or cuDNN backend for fp16/bf16 on
// Hopper, the memory-efficient one for fp32, as PyTorch chooses). It has no out= variant, so it
// allocates its result, as eager code does, and `out` is left alone.
template <bool kCausal>
void baseline(const std::vector<at::Tensor>& inputs, at::Tensor&) {
  (void)at::scaled_dot_product_attention(inputs.at(0), inputs.at(1), inputs.at(2), {}, 0.0, kCausal);
}

void cuda_params(const std::vector<at::Tensor>& inputs, at::Tensor& out, KernelParams& params) {
  const at::Tensor& q = inputs.at(0);
  params.add_pointer(q.const_data_ptr());
  params.add_pointer(inputs.at(1).const_data_ptr());
  params.add_pointer(inputs.at(2).const_data_ptr());
  params.add_pointer(out.mutable_data_ptr());
  for (int i = 0; i < 4; ++i) params.add_i64(q.size(i));
}

// Hostile sets of q, k, v at the job's shape. Outputs are convex combinations of v rows, so they
// never exceed max |v| and the tolerance scale P @ |v| follows v's scale:
//   near_zero     q, k, v ~ 1e-4 randn (fp16 subnormals): uniform weights, tiny outputs;
//   large_logits  q, k integers in [-100, 100], v randn: scores up to ~1e4 with gaps of at least
//                 1 / sqrt(D), exact in fp32 whatever the summation order (every partial sum is an
//                 integer below 2^24), so only a missing max subtraction (exp overflow) or a
//                 biased exponent fails, never an ill-conditioned near tie;
//   mixed_scales  q scaled per head by 10^-1 .. 10^1 (temperature), v per head by 10^3 .. 10^-3
//                 (per head, not per key: a correct fp16 kernel rounds P to fp16, whose subnormals
//                 below 2^-14 carry an absolute error of up to 2^-25 each; a weight that small on a
//                 v row 10^6 times larger than the dominant rows would put that error far above
//                 the tolerance's fraction of P @ |v|);
//   all_zeros     q, k, v all zero: every output 0;
//   zero_scores   q = k = 0, v randn: uniform attention, the mean of the v rows (causal: of rows
//                 j <= i);
//   all_equal     q, k, v all 7.25: every output 7.25;
//   nan_q         NaN in one element of every fifth query row: that row's output is NaN;
//   nan_k, nan_v  (flash_attention only) NaN in one element of k (v) in every third head: every
//                 output of the head (of the NaN's column) is NaN.
// Left out, since a correct flash kernel and the reference part ways there:
//   - a NaN in k or v of the causal type: the math reference adds the causal mask as -inf to the
//     scores (NaN + -inf = NaN) and multiplies masked weights of 0 by the NaN v, so rows that
//     never see the key come out NaN, while a kernel that skips the masked tiles keeps them
//     finite;
//   - +-inf anywhere: an infinite score is inf - inf = NaN after the max subtraction or not,
//     depending on which other scores of the row are infinite and on the order of the fp32
//     summation of q . k (inf + -inf), which differs between implementations;
//   - v near the dtype's maximum: the unnormalised fp32 accumulator of a flash kernel sums up to
//     seq such values before the final division and overflows for bf16 and fp32 values near
//     their maximum, where the fp64 reference does not.
template <bool kCausal>
std::vector<HostileCase> hostile_inputs(const std::vector<int64_t>& shape, DType dtype, c10::Device device,
                                        uint64_t seed) {
  at::manual_seed(seed);
  const int64_t b = shape.at(0), h = shape.at(1), s = shape.at(2), d = shape.at(3);
  const at::ScalarType st = torch_dtype(dtype);
  auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
  auto i64 = f32.dtype(at::kLong);
  auto cast = [&](const at::Tensor& x) { return x.to(st).contiguous(); };
  auto randn = [&] { return at::randn(dims(shape), f32); };
  auto integers = [&] { return at::randint(-100, 101, dims(shape), f32); };
  const at::Tensor zeros = at::zeros(dims(shape), f32);
  const at::Tensor nan = at::full({}, std::nan(""), f32);

  std::vector<HostileCase> cases;
  cases.push_back({"near_zero", {cast(randn() * 1e-4), cast(randn() * 1e-4), cast(randn() * 1e-4)}});
  cases.push_back({"large_logits", {cast(integers()), cast(integers()), cast(randn())}});
  {
    const at::Tensor q_scale = at::pow(10.0, at::linspace(-1.0, 1.0, h, f32)).reshape({1, h, 1, 1});
    const at::Tensor v_scale = at::pow(10.0, at::linspace(3.0, -3.0, b * h, f32)).reshape({b, h, 1, 1});
    cases.push_back({"mixed_scales", {cast(randn() * q_scale), cast(randn()), cast(randn() * v_scale)}});
  }
  cases.push_back({"all_zeros", {cast(zeros), cast(zeros), cast(zeros)}});
  cases.push_back({"zero_scores", {cast(zeros), cast(zeros), cast(randn())}});
  {
    const at::Tensor equal = at::full(dims(shape), 7.25, f32);
    cases.push_back({"all_equal", {cast(equal), cast(equal), cast(equal)}});
  }
  const at::Tensor col = at::arange(d, i64).reshape({1, 1, 1, d});
  {
    // Row r of the flattened [B * H * S] rows gets a NaN at column 13 r % D if r % 5 == 2 (row 0
    // of a tensor of at most two rows).
    const int64_t rows = b * h * s;
    const at::Tensor r = at::arange(rows, i64).reshape({b, h, s, 1});
    const at::Tensor nan_rows = rows > 2 ? (r % 5 == 2) : (r == 0);
    cases.push_back({"nan_q", {cast(at::where(nan_rows & (col == (r * 13) % d), nan, randn())), cast(randn()),
                               cast(randn())}});
  }
  if (!kCausal) {
    // Head n of the flattened [B * H] heads gets one NaN, at key 7 n % S and column 13 n % D, if
    // n % 3 == 1 (k) or n % 3 == 2 (v); one head of a tensor with fewer.
    const int64_t heads = b * h;
    const at::Tensor n = at::arange(heads, i64).reshape({b, h, 1, 1});
    const at::Tensor key = at::arange(s, i64).reshape({1, 1, s, 1});
    const at::Tensor at_one = (key == (n * 7) % s) & (col == (n * 13) % d);
    const at::Tensor k_heads = heads > 1 ? (n % 3 == 1) : (n == 0);
    const at::Tensor v_heads = heads > 2 ? (n % 3 == 2) : (n == heads - 1);
    cases.push_back({"nan_k", {cast(randn()), cast(at::where(k_heads & at_one, nan, randn())), cast(randn())}});
    cases.push_back({"nan_v", {cast(randn()), cast(randn()), cast(at::where(v_heads & at_one, nan, randn()))}});
  }
  return cases;
}

}  // namespace

extern const TorchHarness kHarness = {make_inputs,        make_output, reference<false>,       baseline<false>,
                                      nullptr,            cuda_params, hostile_inputs<false>, tolerance_scale<false>};
extern const TorchHarness kCausalHarness = {make_inputs,  make_output, reference<true>,       baseline<true>,
                                            nullptr,      cuda_params, hostile_inputs<true>, tolerance_scale<true>};

}  // namespace ak::kernels::flash_attention
