// The model pipeline's Python files (models/README.md), embedded at build time
// (models/CMakeLists.txt): the worker writes them into a folder of its work directory, keeping
// their relative paths, and runs profile_model.py with its Python.
#pragma once

#include <string_view>
#include <vector>

namespace ak::models {

struct PipelineFile {
  std::string_view path;  // relative to models/: "profile_model.py", "examples/gpt2.py"
  std::string_view text;
};

// Every file, profile_model.py first.
const std::vector<PipelineFile>& pipeline_files();

}  // namespace ak::models
