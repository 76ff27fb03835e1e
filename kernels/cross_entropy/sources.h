// The cross_entropy starter sources, embedded at build time from cross_entropy_cpu.cc and
// cross_entropy.cu (kernels/CMakeLists.txt generates their definitions).
#pragma once

#include <string_view>

namespace ak::kernels::cross_entropy {

extern const std::string_view kCpuSource;   // cross_entropy_cpu.cc
extern const std::string_view kCudaSource;  // cross_entropy.cu
extern const std::string_view kTritonSource;  // cross_entropy.py

}  // namespace ak::kernels::cross_entropy
