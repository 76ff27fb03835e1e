// The Triton compile script, embedded at build time from compile.py (worker/CMakeLists.txt
// generates the definition); the compiler writes it into its cache folder and runs it.
#pragma once

#include <string_view>

namespace ak::triton {

extern const std::string_view kCompileScript;  // compile.py

}  // namespace ak::triton
