// The rotary_embedding starter sources, embedded at build time from rotary_embedding_cpu.cc and
// rotary_embedding.cu (kernels/CMakeLists.txt generates their definitions).
#pragma once

#include <string_view>

namespace ak::kernels::rotary_embedding {

extern const std::string_view kCpuSource;   // rotary_embedding_cpu.cc
extern const std::string_view kCudaSource;  // rotary_embedding.cu
extern const std::string_view kTritonSource;  // rotary_embedding.py

}  // namespace ak::kernels::rotary_embedding
