// The layernorm starter sources, embedded at build time from layernorm_cpu.cc and layernorm.cu
// (kernels/CMakeLists.txt generates their definitions).
#pragma once

#include <string_view>

namespace ak::kernels::layernorm {

extern const std::string_view kCpuSource;   // layernorm_cpu.cc
extern const std::string_view kCudaSource;  // layernorm.cu
extern const std::string_view kTritonSource;  // layernorm.py

}  // namespace ak::kernels::layernorm
