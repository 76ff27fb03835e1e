#include "models/pipeline_source.h"

namespace ak::models {

// Defined in the generated models_embedded.cc (kernels/embed.cmake), one per file.
extern const std::string_view k_profile_model_py;
extern const std::string_view k_verify_model_py;
extern const std::string_view k_plug_py;
extern const std::string_view k_classify_py;
extern const std::string_view k_model_loader_py;
extern const std::string_view k_examples_gpt2_py;
extern const std::string_view k_examples_llama_py;
extern const std::string_view k_examples_bert_py;
extern const std::string_view k_export_hf_py;
extern const std::string_view k_export_entries_h;
extern const std::string_view k_export_torch_binding_cpp;
extern const std::string_view k_export_package_init_py;
extern const std::string_view k_export_build_py;
extern const std::string_view k_export_README_md;

const std::vector<PipelineFile>& pipeline_files() {
  static const std::vector<PipelineFile> files = {
      {"profile_model.py", k_profile_model_py},
      {"verify_model.py", k_verify_model_py},
      {"plug.py", k_plug_py},
      {"classify.py", k_classify_py},
      {"model_loader.py", k_model_loader_py},
      {"examples/gpt2.py", k_examples_gpt2_py},
      {"examples/llama.py", k_examples_llama_py},
      {"examples/bert.py", k_examples_bert_py},
      {"export_hf.py", k_export_hf_py},
      {"export/entries.h", k_export_entries_h},
      {"export/torch_binding.cpp", k_export_torch_binding_cpp},
      {"export/package_init.py", k_export_package_init_py},
      {"export/build.py", k_export_build_py},
      {"export/README.md", k_export_README_md},
  };
  return files;
}

}  // namespace ak::models
