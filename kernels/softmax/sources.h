// The softmax starter sources, embedded at build time from softmax_cpu.cc and softmax.cu
// (kernels/CMakeLists.txt generates their definitions).
#pragma once

#include <string_view>

namespace ak::kernels::softmax {

extern const std::string_view kCpuSource;   // softmax_cpu.cc
extern const std::string_view kCudaSource;  // softmax.cu
extern const std::string_view kTritonSource;  // softmax.py

}  // namespace ak::kernels::softmax
