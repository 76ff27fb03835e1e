#include "kernelbench/builtin.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/job.h"
#include "common/process.h"
#include "kernelbench/harness_source.h"
#include "kernels/registry.h"

namespace ak::kernelbench {
namespace {

// The template's plan for a problem, from kernelbench/match.py (the problem's source read with
// Python's ast, never run): the kernel type, its shape as declared (nullopt where a dim is not
// integer arithmetic over constants), and ModelNew with {ENTRY}, {LAUNCH} and {<tunable>} where the
// configuration goes. kNotFound with the reason when the problem is not exactly the template's op
// or the template cannot serve its shape.
struct Plan {
  std::string kernel_type;
  std::vector<std::optional<int64_t>> shape;
  std::string shape_names;         // "[rows, cols]"
  std::string model;               // class ModelNew ...
  std::vector<std::string> notes;  // header lines about the mapping
};

Result<Plan> match_template(const std::string& python, const std::string& kernel_type, const std::string& code) {
  ChildProcess::Options o;
  o.capture_stdout = true;  // stderr (a failure's traceback) goes to ours
  o.pipe_stdin = true;
  auto child = ChildProcess::spawn({python, "-c", std::string(kMatchScript)}, o);
  if (!child.ok())
    return Status::unavailable("cannot run " + python + " to match the problem against the " + kernel_type +
                               " template: " + child.status().message());
  if (Status s = child->write_line(nlohmann::json{{"template", kernel_type}, {"code", code}}.dump()); !s.ok())
    return Status::unavailable("cannot hand the problem to match.py under " + python + ": " + s.message());
  auto line = child->read_line(std::chrono::seconds(60));
  if (line.ok() && !*line) {
    child->kill_group();
    return Status::timed_out("matching the problem against the " + kernel_type + " template with " + python +
                             " took over 60 s; stopped");
  }
  const int rc = child->wait();  // it has printed its line or closed stdout: it is exiting
  const auto doc = line.ok() ? nlohmann::json::parse(**line, nullptr, /*allow_exceptions=*/false) : nlohmann::json();
  if (rc != 0 || !doc.is_object() || !doc.contains("ok"))
    return Status::internal("match.py under " + python + " exited " + std::to_string(rc) +
                            " without an answer (its reason is above)");
  if (!doc.value("ok", false)) return Status::not_found(doc.value("reason", std::string("not covered")));
  Plan p;
  p.kernel_type = doc.value("kernel_type", "");
  for (const auto& d : doc.value("shape", nlohmann::json::array()))
    p.shape.push_back(d.is_number_integer() ? std::optional<int64_t>(d.get<int64_t>()) : std::nullopt);
  p.shape_names = doc.value("shape_names", "");
  p.model = doc.value("model", "");
  p.notes = doc.value("notes", std::vector<std::string>{});
  return p;
}

struct Covered {
  const char* name;
  const char* kernel_type;  // also the template's name in match.py
};

const std::vector<Covered>& covered() {
  static const std::vector<Covered> list = {
      {"1_Square_matrix_multiplication_", "matmul"},
      {"2_Standard_matrix_multiplication_", "matmul"},
      {"4_Matrix_vector_multiplication_", "matmul"},
      {"6_Matmul_with_large_K_dimension_", "matmul"},
      {"7_Matmul_with_small_K_dimension_", "matmul"},
      {"8_Matmul_with_irregular_shapes_", "matmul"},
      {"9_Tall_skinny_matrix_multiplication_", "matmul"},
      {"13_Matmul_for_symmetric_matrices", "matmul"},
      {"23_Softmax", "softmax"},
      {"40_LayerNorm", "layernorm"},
      {"95_CrossEntropyLoss", "cross_entropy"},
  };
  return list;
}

// Level-1 problems near the library's types that it cannot run exactly.
const std::map<std::string, std::string>& known_gaps() {
  static const std::map<std::string, std::string> gaps = {
      {"3_Batched_matrix_multiplication", "a batched product (torch.bmm of 3-D tensors); the library's matmul is one 2-D product"},
      {"10_3D_tensor_matrix_multiplication", "A is 3-D; the library's matmul takes 2-D A and B"},
      {"11_4D_tensor_matrix_multiplication", "an einsum over a 4-D tensor; the library's matmul takes 2-D A and B"},
      {"12_Matmul_with_diagonal_matrices_", "diag(A) @ B is a broadcast product, not a GEMM"},
      {"14_Matmul_for_upper_triangular_matrices", "triu(A @ B): two ops"},
      {"15_Matmul_for_lower_triangular_matrices", "tril(A @ B): two ops"},
      {"16_Matmul_with_transposed_A", "A.T @ B: the library's matmul reads row-major A [M, K]; a transposing copy would be a second op"},
      {"17_Matmul_with_transposed_B", "A @ B.T: the library's matmul reads row-major B [K, N]; a transposing copy would be a second op"},
      {"18_Matmul_with_transposed_both", "A.T @ B.T: the library's matmul reads row-major operands"},
      {"24_LogSoftmax", "log-softmax: the library has softmax only"},
      {"36_RMSNorm_", "normalizes over dim 1 of a 4-D input with eps 1e-5 and no weight; the library's rmsnorm normalizes the "
                      "last dim with eps 1e-6 and a weight"},
      {"47_Sum_reduction_over_a_dimension", "sums over dim 1 of a 3-D input; the library's reduce sums the last dim"},
      {"48_Mean_reduction_over_a_dimension", "a mean over dim 1 of a 3-D input; the library's reduce sums the last dim"},
      {"49_Max_reduction_over_a_dimension", "a max over dim 1 of a 3-D input; the library's reduce_max reduces the last dim"},
      {"53_Min_reduction_over_a_dimension", "a min; the library has sum and max reductions"},
      {"97_ScaledDotProductAttention", "the library has no Triton attention source (flash_attention is CUDA only)"},
  };
  return gaps;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t k = 0; k < s.size(); ++k) out += (k ? ", " : "") + std::to_string(s[k]);
  return out + "]";
}

std::string config_text(const std::map<std::string, int64_t>& c) {
  std::string out;
  for (const auto& [k, v] : c) out += (out.empty() ? "" : ", ") + k + "=" + std::to_string(v);
  return out;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> builtin_problems() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Covered& c : covered()) out.emplace_back(c.name, c.kernel_type);
  return out;
}

std::string generation_file_name(int level, int problem_id, int sample_id) {
  return "level_" + std::to_string(level) + "_problem_" + std::to_string(problem_id) + "_sample_" +
         std::to_string(sample_id) + "_kernel.py";
}

Result<BuiltinCandidate> builtin_candidate(const Problem& p, const BuiltinOptions& o) {
  const auto dtype = parse_dtype(o.precision);
  if (!dtype) return Status::invalid("precision " + o.precision + ": expected fp32, fp16 or bf16");
  if (o.tuned && o.gpu_model.empty())
    return Status::invalid("a tuning database needs the GPU model whose entries to use (tuned configurations are per GPU model)");
  std::string stem = p.name;
  if (stem.size() > 3 && stem.compare(stem.size() - 3, 3, ".py") == 0) stem.resize(stem.size() - 3);
  if (p.level != 1) return Status::not_found("built-in candidates cover level 1 only");
  const Covered* entry = nullptr;
  for (const Covered& c : covered())
    if (stem == c.name) entry = &c;
  if (!entry) {
    auto gap = known_gaps().find(stem);
    return Status::not_found(gap != known_gaps().end() ? gap->second : "no built-in template for this problem");
  }
  auto plan = match_template(o.python, entry->kernel_type, p.code);
  if (!plan.ok()) return plan.status();

  const kernels::KernelSpec* spec = kernels::find(plan->kernel_type);
  if (!spec || !spec->backends.count(Backend::kTriton))
    return Status::internal("kernel type " + plan->kernel_type + " has no Triton source in this build");
  const kernels::BackendSource& src = spec->backends.at(Backend::kTriton);

  BuiltinCandidate c;
  c.kernel_type = plan->kernel_type;
  bool shape_known = !plan->shape.empty();
  for (const auto& d : plan->shape) shape_known = shape_known && d && *d >= 1;
  if (shape_known)
    for (const auto& d : plan->shape) c.declared_shape.push_back(*d);

  // Configuration: the spec's default, with a tuned entry on top when one matches.
  c.config = kernels::default_config(src, *dtype);
  c.config_origin = "default: the Triton default configuration of kernels/" + c.kernel_type + "/spec.cc for " + o.precision;
  if (o.tuned) {
    const std::string where = "tuning database " + o.tuning_path + " (" + o.gpu_model + ", triton, " + o.precision + ")";
    if (!shape_known) {
      c.config_origin += "; " + where + " not consulted: the declared shape is not integer arithmetic over constants";
    } else if (auto match = o.tuned->find(c.kernel_type, o.gpu_model, o.precision, c.declared_shape, "triton")) {
      std::string bad;
      for (const auto& [k, v] : match->config) {
        const bool known = std::any_of(src.space.begin(), src.space.end(), [&](const kernels::Tunable& t) { return t.name == k; });
        if (!known || v < 1) bad = k;
      }
      if (!bad.empty()) {
        c.config_origin += "; the entry of " + where + " at " + shape_text(match->shape) + " has " + bad +
                           ", not a Triton tunable of " + c.kernel_type + ", so it was not used";
      } else {
        for (const auto& [k, v] : match->config) c.config[k] = v;
        c.tuned = true;
        c.config_origin = "tuned: " + where + ", " +
                          (match->exact ? "entry at the declared shape " : "nearest tuned shape ") + shape_text(match->shape);
      }
    } else {
      c.config_origin += "; " + where + " has no " + c.kernel_type + " entry";
    }
  }

  // The launch: constexpr tunables by name, then num_warps and num_stages.
  std::string launch;
  for (const auto& [k, v] : c.config)
    if (k != "AK_NUM_WARPS" && k != "AK_NUM_STAGES") launch += k + "=" + std::to_string(v) + ", ";
  launch += "num_warps=" + std::to_string(kernels::config_value(c.config, src.space, "AK_NUM_WARPS", 4)) +
            ", num_stages=" + std::to_string(kernels::config_value(c.config, src.space, "AK_NUM_STAGES", 1));
  std::string model = plan->model;
  replace_all(model, "{ENTRY}", src.entry);
  replace_all(model, "{LAUNCH}", launch);
  for (const auto& [k, v] : c.config) replace_all(model, "{" + k + "}", std::to_string(v));

  std::ostringstream shape_line;
  shape_line << "# Declared shape " << plan->shape_names << ": ";
  if (shape_known) {
    shape_line << shape_text(c.declared_shape);
  } else {
    shape_line << "not evaluated (";
    for (size_t k = 0; k < plan->shape.size(); ++k)
      shape_line << (k ? ", " : "") << (plan->shape[k] ? std::to_string(*plan->shape[k]) : "?");
    shape_line << ")";
  }
  shape_line << "; the launch is computed from the runtime shapes.";

  std::ostringstream out;
  const std::string lib = "kernels/" + c.kernel_type + "/" + c.kernel_type + ".py";
  out << "# Built-in candidate of the AutoKernel kernel library for KernelBench level " << p.level << " problem "
      << p.problem_id << " (" << p.name << ", code " << p.code_hash << ").\n"
      << "# Kernel type: " << c.kernel_type << ", Triton source " << lib << " (entry " << src.entry
      << "), embedded verbatim below.\n"
      << "# Precision: " << o.precision << " (the kernel takes its dtype from the tensors).\n"
      << shape_line.str() << "\n"
      << "# Configuration: " << config_text(c.config) << "\n"
      << "# Configuration from " << c.config_origin << ".\n";
  for (const std::string& n : plan->notes) out << "# " << n << ".\n";
  out << "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n\n"
      << "# ---- " << lib << " ----\n"
      << src.source << (src.source.empty() || src.source.back() == '\n' ? "" : "\n") << "# ---- end of " << lib
      << " ----\n\n\n"
      << model;
  c.source = out.str();
  return c;
}

}  // namespace ak::kernelbench
