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
  };
  return files;
}

}  // namespace ak::models
