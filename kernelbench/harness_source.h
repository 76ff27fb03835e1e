// What the C++ side runs in Python, embedded at build time (kernelbench/CMakeLists.txt generates
// the definitions):
// - the KernelBench harness (kernelbench/harness/, protocol in kernelbench/HARNESS.md) as one
//   zipapp (kernelbench/build_zipapp.py, deterministic); the worker writes it into its work folder
//   under a name that holds the hash of these bytes and runs it with the worker's Python;
// - the bridge's reader of the Hugging Face dataset's files (hf_dataset.py, bridge.h);
// - the matcher of problems to the built-in templates (match.py, builtin.h).
#pragma once

#include <string_view>

namespace ak::kernelbench {

extern const std::string_view kHarnessZipapp;    // harness.pyz: binary, a zip archive
extern const std::string_view kHfDatasetScript;  // hf_dataset.py: the Hugging Face dataset's Parquet files (bridge.h)
extern const std::string_view kMatchScript;      // match.py: a problem's source against a template (builtin.h)

}  // namespace ak::kernelbench
