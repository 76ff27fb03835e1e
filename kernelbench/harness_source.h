// The KernelBench harness (kernelbench/harness.py, protocol in kernelbench/HARNESS.md), embedded
// at build time (kernelbench/CMakeLists.txt generates the definition); the worker writes it into
// its work folder and runs it with the worker's Python. Beside it, the bridge's reader of the
// Hugging Face dataset's files.
#pragma once

#include <string_view>

namespace ak::kernelbench {

extern const std::string_view kHarnessScript;    // harness.py
extern const std::string_view kHfDatasetScript;  // hf_dataset.py: the Hugging Face dataset's Parquet files (bridge.h)

}  // namespace ak::kernelbench
