// The flash_attention starter source, embedded at build time from flash_attention.cu
// (kernels/CMakeLists.txt generates its definition). flash_attention_causal's starter is the same
// text behind "#define AK_CAUSAL 1". There is no cpu backend.
#pragma once

#include <string_view>

namespace ak::kernels::flash_attention {

extern const std::string_view kCudaSource;  // flash_attention.cu

}  // namespace ak::kernels::flash_attention
