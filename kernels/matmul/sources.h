// The matmul starter sources, embedded at build time from matmul_cpu.cc and matmul.cu
// (kernels/CMakeLists.txt generates their definitions).
#pragma once

#include <string_view>

namespace ak::kernels::matmul {

extern const std::string_view kCpuSource;   // matmul_cpu.cc
extern const std::string_view kCudaSource;  // matmul.cu
extern const std::string_view kTritonSource;  // matmul.py

}  // namespace ak::kernels::matmul
