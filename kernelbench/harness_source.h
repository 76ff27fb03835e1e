// The KernelBench harness (kernelbench/harness.py, protocol in kernelbench/HARNESS.md), embedded
// at build time (kernelbench/CMakeLists.txt generates the definition); the worker writes it into
// its work folder and runs it with the worker's Python.
#pragma once

#include <string_view>

namespace ak::kernelbench {

extern const std::string_view kHarnessScript;  // harness.py

}  // namespace ak::kernelbench
