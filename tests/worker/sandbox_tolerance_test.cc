// tests for worker/sandbox/tolerance.h: the comparison every verification stage applies.
#include "worker/sandbox/tolerance.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/reference.h"

namespace ak::sandbox {
namespace {

// One element per entry, fp32 as the harness compares them.
at::Tensor values(std::vector<float> v) { return at::tensor(v, at::kFloat); }

bool all_ok(const Comparison& c) { return c.ok.all().item<bool>(); }

// flash_attention and flash_attention_causal, each with its harness and spec (a failure when missing).
struct FlashType {
  std::string name;
  const kernels::TorchHarness* harness;
  const kernels::KernelSpec* spec;
  bool causal;
};
std::vector<FlashType> flash_types() {
  std::vector<FlashType> out;
  for (const char* name : {"flash_attention", "flash_attention_causal"}) {
    FlashType t{name, kernels::find_harness(name), kernels::find(name), std::string(name) == "flash_attention_causal"};
    if (t.harness != nullptr && t.spec != nullptr)
      out.push_back(t);
    else
      ADD_FAILURE() << name << " has no harness or no spec";
  }
  return out;
}

TEST(SandboxTolerance, SmallestNormalsAreThoseOfEachDtype) {
  EXPECT_EQ(smallest_normal(at::kFloat), 0x1p-126);
  EXPECT_EQ(smallest_normal(at::kBFloat16), 0x1p-126);
  EXPECT_EQ(smallest_normal(at::kHalf), 0x1p-14);
}

// The case found on the H200: fp32 flash_attention at 1x32x8192x128, hostile set large_logits,
// where the tolerance scale (P @ |v|) was as tiny as the reference.
TEST(SandboxTolerance, ZeroPassesWhereTheFp32ReferenceIsSubnormal) {
  const at::Tensor ref = values({-2.28e-42f});
  const at::Tensor scale = values({2.28e-42f});
  EXPECT_TRUE(all_ok(compare_with_tolerance(values({0.0f}), ref, at::kFloat, {1e-4, 1e-6}, scale)));
}

TEST(SandboxTolerance, ZeroPassesWhereTheReferenceIsBelowEachDtypesSmallestNormal) {
  for (at::ScalarType d : {at::kFloat, at::kBFloat16, at::kHalf}) {
    const float below = float(0.5 * smallest_normal(d));
    const at::Tensor ref = values({below, -below}).to(d).to(at::kFloat);  // as the dtype holds it
    const at::Tensor scale = values({0.0f, 0.0f});                        // e.g. attention weights that underflowed
    EXPECT_TRUE(all_ok(compare_with_tolerance(values({0.0f, -0.0f}), ref, d, {1e-6, 1e-6}, scale))) << d;
    EXPECT_TRUE(all_ok(compare_with_tolerance(values({0.0f, 0.0f}), ref, d, {0.0, 0.0}))) << d;
  }
}

TEST(SandboxTolerance, ZeroStillFailsWhereTheReferenceIsTheSmallestNormalOrAbove) {
  for (at::ScalarType d : {at::kFloat, at::kBFloat16, at::kHalf}) {
    const float normal = float(smallest_normal(d));
    const at::Tensor ref = values({normal, -2 * normal});
    const Comparison c = compare_with_tolerance(values({0.0f, 0.0f}), ref, d, {0.0, 1e-3});
    EXPECT_FALSE(c.ok[0].item<bool>()) << d;
    EXPECT_FALSE(c.ok[1].item<bool>()) << d;
  }
}

TEST(SandboxTolerance, AnOutputFarFromZeroStillFailsWhereTheReferenceIsSubnormal) {
  for (at::ScalarType d : {at::kFloat, at::kBFloat16, at::kHalf}) {
    const float below = float(0.5 * smallest_normal(d));
    const Comparison c = compare_with_tolerance(values({1.0f, -below * 4}), values({below, below}), d, {0.0, 1e-6});
    EXPECT_FALSE(c.ok[0].item<bool>()) << d;
    EXPECT_FALSE(c.ok[1].item<bool>()) << d;
  }
}

// An fp16 flash kernel rounds its unnormalised weights exp(s - max) to fp16 before P @ V; weights
// below fp16's smallest normal carry an absolute error there, which P @ |v| alone does not cover.
// One query, one key of weight 1 on a tiny v, and 511 keys of weight 16.57 fp16 subnormal steps
// (about 2^-20) on v = 1: each weight rounds 0.43 of a step away, and the kernel's output is off by
// about 2.6% (511 equal rounding errors), which P @ |v| alone failed and flash_attention's scale
// now allows; an output off by ten times the bound still fails.
TEST(SandboxTolerance, AnFp16FlashKernelsSubnormalWeightRoundingIsInTheScaleAndNoMore) {
  const int64_t seq = 512;
  for (const auto& [type, h, spec, causal] : flash_types()) {
    // head_dim 1 and q = 1: the scores are the keys. Causal: the last query, which sees every key.
    at::Tensor q = at::ones({1, 1, seq, 1}, at::kFloat);
    at::Tensor k = at::full({1, 1, seq, 1}, -13.828125, at::kFloat);  // exact in fp16
    k[0][0][0][0] = 0.0;
    at::Tensor v = at::ones({1, 1, seq, 1}, at::kFloat);
    v[0][0][0][0] = 1e-6;
    const std::vector<at::Tensor> in = {q.to(at::kHalf), k.to(at::kHalf), v.to(at::kHalf)};
    // The kernel's way: weights in fp32, rounded to fp16 for the product, the row sum in fp32.
    const at::Tensor kf = in[1].to(at::kFloat)[0][0].squeeze(1), vf = in[2].to(at::kFloat)[0][0].squeeze(1);
    const at::Tensor u = at::exp(kf - kf.max());
    ASSERT_LT(u[1].item<float>(), 0x1p-14) << "the 511 weights are fp16 subnormals";
    const double steps = u[1].item<double>() / 0x1p-24;
    ASSERT_GT(std::abs(steps - std::round(steps)), 0.3) << "each rounds far from its value: " << steps;
    const double got = (at::dot(u.to(at::kHalf).to(at::kFloat), vf) / u.sum()).item<double>();
    const at::Tensor ref_all = h->reference(in).flatten(),
                     scale_all = h->tolerance_scale(in, spec->tolerance.at(DType::kF16)).flatten();
    const int64_t row = causal ? seq - 1 : 0;  // causal: only the last query sees every key
    const at::Tensor ref = ref_all.slice(0, row, row + 1), scale = scale_all.slice(0, row, row + 1);
    const kernels::Tolerance tol = spec->tolerance.at(DType::kF16);
    const at::Tensor out = at::tensor({float(got)}).to(at::kHalf).to(at::kFloat);
    const double err = std::abs(out.item<double>() - ref.item<double>());
    const double pv16 = (at::dot(at::softmax(kf.to(at::kDouble), 0), vf.to(at::kDouble).abs())).item<double>();
    EXPECT_GT(err, tol.atol * pv16 + tol.rtol * std::abs(ref.item<double>()))
        << type << ": the case must be one that P @ |v| alone cannot pay for";
    EXPECT_TRUE(all_ok(compare_with_tolerance(out, ref, at::kHalf, tol, scale)))
        << type << ": got " << out.item<double>() << ", reference " << ref.item<double>() << ", scale "
        << scale.item<double>();
    // 1.5 times the whole bound away is still a failure (the kernel-like output sits at about 0.86).
    const double bound = tol.atol * scale.item<double>() + tol.rtol * std::abs(ref.item<double>());
    const at::Tensor wrong = at::tensor({float(ref.item<double>() + 1.5 * bound)});
    EXPECT_FALSE(all_ok(compare_with_tolerance(wrong, ref, at::kHalf, tol, scale))) << type;
    // bf16 and fp32 scales stay P @ |v| (bf16's subnormals are below 2^-126).
    const std::vector<at::Tensor> bf = {q.to(at::kBFloat16), k.to(at::kBFloat16), v.to(at::kBFloat16)};
    const double pv =
        (at::dot(at::softmax(bf[1][0][0].squeeze(1).to(at::kDouble), 0), bf[2][0][0].squeeze(1).to(at::kDouble).abs()))
            .item<double>();
    EXPECT_NEAR(h->tolerance_scale(bf, spec->tolerance.at(DType::kBF16)).flatten()[row].item<double>(), pv, 1e-3 * pv)
        << type;
  }
}

// The flash reference, computed a head at a time, and its scale, P @ |v| with P computed as the
// math reference computes it: on every hostile set, a random one and (both types) a NaN in one
// key, at a shape with two batches, three heads and a ragged sequence, the reference is PyTorch's
// math attention of the whole batch, and the scale is NaN exactly where the math attention of
// (q, k, |v|) is and equal to it elsewhere, element by element. fp16 adds its subnormal weight
// rounding: never below, and above by at most sum_j 2^-25 |v_j| / atol.
TEST(SandboxTolerance, TheFlashReferenceAndScaleAreTheMathAttentionsAndNaNWhereTheyAre) {
  const std::vector<int64_t> shape = {2, 3, 37, 16};
  auto math = [](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal) {
    return std::get<0>(at::_scaled_dot_product_attention_math(q.to(at::kDouble), k.to(at::kDouble), v.to(at::kDouble),
                                                              {}, 0.0, causal));
  };
  for (const auto& [type, h, spec, causal] : flash_types()) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      std::vector<kernels::HostileCase> cases = h->hostile_inputs(shape, dtype, at::kCPU, 11);
      cases.push_back({"random", h->make_inputs(shape, dtype, at::kCPU, 12)});
      // A NaN in key 5 of one head: causal, rows 0..4 never see it and are NaN all the same in the
      // math path, which adds the mask to the NaN score (a mask filled in would keep them finite).
      kernels::HostileCase nan_key{"nan_key_5", h->make_inputs(shape, dtype, at::kCPU, 13)};
      nan_key.inputs[1][1][2][5][3] = std::nan("");
      cases.push_back(nan_key);
      // Infinite keys, which the hostile sets leave out (kernels part ways there) but the reference
      // and the scale must still agree on. Head (0, 1): every key -inf in column 3, so a row is all
      // -inf (weights 0, as at::_safe_softmax gives) or all +inf (NaN). Head (1, 0): key 7 +inf in
      // column 2, so a masked +inf score (rows 0..6 of the causal type) must become NaN as adding
      // -inf makes it, and a masked -inf stay -inf.
      kernels::HostileCase inf_keys{"inf_keys", h->make_inputs(shape, dtype, at::kCPU, 14)};
      inf_keys.inputs[1][0][1].select(1, 3).fill_(-std::numeric_limits<double>::infinity());
      inf_keys.inputs[1][1][0][7][2] = std::numeric_limits<double>::infinity();
      cases.push_back(inf_keys);
      for (const auto& c : cases) {
        SCOPED_TRACE(std::string(type) + " " + dtype_name(dtype) + " " + c.name);
        const at::Tensor &q = c.inputs.at(0), &k = c.inputs.at(1), &v = c.inputs.at(2);
        const at::Tensor want_ref = math(q, k, v, causal).to(q.scalar_type()).to(at::kFloat);
        const at::Tensor ref = h->reference(c.inputs);
        // Equal but for a rounding to the dtype that the fp64 sums' order may flip (one ulp).
        const double ulp = dtype == DType::kF32 ? 0x1p-23 : dtype == DType::kF16 ? 0x1p-10 : 0x1p-7;
        EXPECT_TRUE(at::allclose(ref, want_ref, ulp, dtype == DType::kF16 ? 0x1p-24 : 0.0, /*equal_nan=*/true));
        EXPECT_TRUE(at::equal(ref.isnan(), want_ref.isnan()));
        const at::Tensor want = math(q, k, v.abs(), causal);
        const at::Tensor scale = h->tolerance_scale(c.inputs, spec->tolerance.at(dtype)).to(at::kDouble);
        ASSERT_EQ(scale.sizes(), want.sizes());
        EXPECT_TRUE(at::equal(scale.isnan(), want.isnan()));
        if (c.name == "nan_key_5") {
          EXPECT_TRUE(want[1][2].isnan().all().item<bool>()) << "every row of the head, those before key 5 too";
          EXPECT_FALSE(want[0][0].isnan().any().item<bool>());
        }
        if (c.name == "inf_keys") {  // the case holds what it is meant to
          EXPECT_TRUE(want[0][1].isnan().any().item<bool>());
          EXPECT_TRUE(want[0][1].eq(0).all(1).any().item<bool>()) << "a row of -inf scores gives 0";
          EXPECT_TRUE(want[1][0].isnan().any().item<bool>());
          EXPECT_FALSE(want[1][0].isnan().all().item<bool>());
        }
        const at::Tensor finite = want.isfinite();
        const at::Tensor got = scale.masked_select(finite), exact = want.masked_select(finite);
        // fp32 rounding of the scale, and the scaling of q k^T done once instead of on q and k.
        const at::Tensor slack = exact.abs() * 1e-6 + 1e-30;
        if (dtype == DType::kF16) {
          const double atol = spec->tolerance.at(DType::kF16).atol;
          const at::Tensor per_head = v.to(at::kDouble).abs().sum(2, /*keepdim=*/true) * (0x1p-25 / atol);
          const at::Tensor bound = per_head.expand_as(want).masked_select(finite);
          EXPECT_TRUE((got >= exact - slack).all().item<bool>());
          EXPECT_TRUE((got <= exact + bound + slack).all().item<bool>());
        } else {
          EXPECT_TRUE(((got - exact).abs() <= slack).all().item<bool>())
              << "largest relative difference " << ((got - exact).abs() / exact.abs()).max().item<double>();
        }
      }
    }
  }
}

TEST(SandboxTolerance, NaNAndInfinityMustBeMatchedExactly) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Comparison c = compare_with_tolerance(values({nan, inf, -inf, 0.0f, nan}), values({nan, inf, inf, nan, 0.0f}),
                                              at::kFloat, {1.0, 1.0});
  EXPECT_TRUE(c.ok[0].item<bool>());
  EXPECT_TRUE(c.ok[1].item<bool>());
  EXPECT_FALSE(c.ok[2].item<bool>());
  EXPECT_FALSE(c.ok[3].item<bool>());
  EXPECT_FALSE(c.ok[4].item<bool>());
}

}  // namespace
}  // namespace ak::sandbox
