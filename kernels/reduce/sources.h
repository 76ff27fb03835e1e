// The reduce starter sources, embedded at build time from reduce_cpu.cc and reduce.cu
// (kernels/CMakeLists.txt generates their definitions).
#pragma once

#include <string_view>

namespace ak::kernels::reduce {

extern const std::string_view kCpuSource;   // reduce_cpu.cc
extern const std::string_view kCudaSource;  // reduce.cu
extern const std::string_view kTritonSource;  // reduce.py

}  // namespace ak::kernels::reduce
