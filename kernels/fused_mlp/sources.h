// The fused_mlp starter source, embedded at build time from fused_mlp.cu, which includes
// kernels/matmul/matmul.cu (kernels/CMakeLists.txt generates its definition). There is no cpu
// or Triton backend.
#pragma once

#include <string_view>

namespace ak::kernels::fused_mlp {

extern const std::string_view kCudaSource;  // fused_mlp.cu (with matmul.cu inlined)

}  // namespace ak::kernels::fused_mlp
