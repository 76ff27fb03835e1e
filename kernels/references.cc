#include "kernels/reference.h"

namespace ak::kernels {

// One line per kernel type: its folder's reference.cc defines the harness.
namespace softmax { extern const TorchHarness kHarness; }
namespace reduce {
extern const TorchHarness kSumHarness;
extern const TorchHarness kMaxHarness;
}  // namespace reduce
namespace rmsnorm {
extern const TorchHarness kHarness;
extern const TorchHarness kE5Harness;
}  // namespace rmsnorm
namespace layernorm {
extern const TorchHarness kHarness;
extern const TorchHarness kE12Harness;
extern const TorchHarness kE6Harness;
}  // namespace layernorm
namespace cross_entropy { extern const TorchHarness kHarness; }
namespace rotary_embedding { extern const TorchHarness kHarness; }
namespace matmul { extern const TorchHarness kHarness; }
namespace flash_attention {
extern const TorchHarness kHarness;
extern const TorchHarness kCausalHarness;
}  // namespace flash_attention
namespace fused_mlp { extern const TorchHarness kHarness; }

const TorchHarness* find_harness(std::string_view kernel_type) {
  if (kernel_type == "softmax") return &softmax::kHarness;
  if (kernel_type == "reduce") return &reduce::kSumHarness;
  if (kernel_type == "reduce_max") return &reduce::kMaxHarness;
  if (kernel_type == "rmsnorm") return &rmsnorm::kHarness;
  if (kernel_type == "rmsnorm_e5") return &rmsnorm::kE5Harness;
  if (kernel_type == "layernorm") return &layernorm::kHarness;
  if (kernel_type == "layernorm_e12") return &layernorm::kE12Harness;
  if (kernel_type == "layernorm_e6") return &layernorm::kE6Harness;
  if (kernel_type == "cross_entropy") return &cross_entropy::kHarness;
  if (kernel_type == "rotary_embedding") return &rotary_embedding::kHarness;
  if (kernel_type == "matmul") return &matmul::kHarness;
  if (kernel_type == "flash_attention") return &flash_attention::kHarness;
  if (kernel_type == "flash_attention_causal") return &flash_attention::kCausalHarness;
  if (kernel_type == "fused_mlp") return &fused_mlp::kHarness;
  return nullptr;
}

}  // namespace ak::kernels
