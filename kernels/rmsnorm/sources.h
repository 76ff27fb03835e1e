// The rmsnorm starter sources, embedded at build time from rmsnorm_cpu.cc and rmsnorm.cu
// (kernels/CMakeLists.txt generates their definitions).
#pragma once

#include <string_view>

namespace ak::kernels::rmsnorm {

extern const std::string_view kCpuSource;   // rmsnorm_cpu.cc
extern const std::string_view kCudaSource;  // rmsnorm.cu
extern const std::string_view kTritonSource;  // rmsnorm.py

}  // namespace ak::kernels::rmsnorm
