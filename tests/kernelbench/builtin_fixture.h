// Shared by builtin_test.cc (CPU) and builtin_gpu_test.cc (label gpu): small problems in
// KernelBench's format and names, written to a temporary checkout, and a runner for the harness
// (kernelbench/harness/) in candidate mode on a generated candidate.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/process.h"
#include "kernelbench/bridge.h"
#include "kernelbench/builtin.h"

namespace ak::kernelbench::testing {

namespace fs = std::filesystem;

// KernelBench's level-1 problems at test sizes: the same Model, forward and get_inputs lines,
// with docstrings and comments as KernelBench writes them; sizes that no tile divides.
inline const char* kSoftmax = R"py(import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Simple model that performs a Softmax activation.
    """
    def __init__(self):
        super(Model, self).__init__()
    
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Applies Softmax activation to the input tensor.
        """
        return torch.softmax(x, dim=1)

batch_size = 4 * 4
dim = 300  # not a multiple of BLOCK

def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]

def get_init_inputs():
    return []  # No special initialization inputs needed
)py";

inline const char* kLayerNorm = R"py(import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Simple model that performs Layer Normalization.
    """
    def __init__(self, normalized_shape: tuple):
        """
        Initializes the LayerNorm layer.
        """
        super(Model, self).__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)

batch_size = 4
features = 3
dim1 = 5
dim2 = 7

def get_inputs():
    x = torch.rand(batch_size, features, dim1, dim2)
    return [x]

def get_init_inputs():
    return [(features, dim1, dim2)]
)py";

inline const char* kMatmul = R"py(import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Simple model that performs a single matrix multiplication (C = A * B) with irregular shapes
    """
    def __init__(self):
        super(Model, self).__init__()
    
    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        """
        Performs matrix multiplication of A and B.
        """
        return torch.matmul(A, B)

M = 37
K = 29 * 3
N = 53

def get_inputs():
    A = torch.rand(M, K)
    B = torch.rand(K, N)
    return [A, B]

def get_init_inputs():
    return []  # No special initialization inputs needed
)py";

inline const char* kCrossEntropy = R"py(import torch
import torch.nn as nn

class Model(nn.Module):
    """
    A model that computes Cross Entropy Loss for multi-class classification tasks.
    """
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, predictions, targets):
        return torch.nn.functional.cross_entropy(predictions, targets)

batch_size = 16
num_classes = 300
input_shape = (num_classes,)  # Output for each class
dim = 1

def get_inputs():
    return [torch.rand(batch_size, *input_shape), torch.randint(0, num_classes, (batch_size,))]

def get_init_inputs():
    return []
)py";

class BuiltinFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "ak-kb-builtin-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    write("kb/level1/23_Softmax.py", kSoftmax);
    write("kb/level1/40_LayerNorm.py", kLayerNorm);
    write("kb/level1/8_Matmul_with_irregular_shapes_.py", kMatmul);
    write("kb/level1/95_CrossEntropyLoss.py", kCrossEntropy);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write(const fs::path& rel, const std::string& text) {
    fs::create_directories((dir_ / rel).parent_path());
    std::ofstream(dir_ / rel) << text;
  }

  Problem problem(int id, const std::string& root = "kb") {
    auto ps = load_problems((dir_ / root).string(), Selection{{}, {id}});
    EXPECT_TRUE(ps.ok()) << ps.status().to_string();
    EXPECT_EQ(ps.ok() ? ps->size() : 0u, 1u);
    return ps.ok() && !ps->empty() ? ps->front() : Problem{};
  }

  // Generates the candidate of problem `id` at `precision` into a file; "" on failure.
  std::string candidate_file(int id, const std::string& precision) {
    const Problem p = problem(id);
    BuiltinOptions o;
    o.precision = precision;
    auto c = builtin_candidate(p, o);
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    if (!c.ok()) return "";
    const fs::path f = dir_ / "builtin" / precision / generation_file_name(p.level, p.problem_id, 0);
    fs::create_directories(f.parent_path());
    std::ofstream(f) << c->source;
    return f.string();
  }

  // Runs `argv` with extra environment entries; returns (exit code, output), -1 on timeout.
  std::pair<int, std::string> run(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                                  std::chrono::seconds timeout) {
    const std::string log = (dir_ / ("run" + std::to_string(++runs_) + ".log")).string();
    SpawnOptions options;
    options.env = env;
    options.output_path = log;
    options.new_process_group = true;
    auto child = ChildProcess::spawn(argv, options);
    if (!child.ok()) return {-2, child.status().to_string()};
    auto rc = child->wait_for(std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
    if (!rc) child->kill_group();
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    return {rc ? *rc : -1, text.str()};
  }

  // The harness in candidate mode (backend triton) on problem `id`'s generated candidate; the
  // result JSON, or null with the failure recorded.
  nlohmann::json harness(int id, const std::string& precision, const std::string& device,
                         const std::vector<std::string>& env, bool strict) {
    const std::string cand = candidate_file(id, precision);
    if (cand.empty()) return nullptr;
    const Problem p = problem(id);
    const std::string tag = std::to_string(id) + "_" + precision + "_" + device;
    const fs::path req = dir_ / (tag + ".request.json"), res = dir_ / (tag + ".result.json");
    nlohmann::json r = {{"mode", "candidate"}, {"problem_path", p.path}, {"candidate_path", cand},
                        {"backend", "triton"}, {"device", device}, {"precision", precision},
                        {"result_path", res.string()}, {"num_correct_trials", 2}, {"num_perf_trials", 3},
                        {"strict", strict}};
    std::ofstream(req) << r.dump();
    auto [rc, out] = run({AK_PYTHON, std::string(AK_SOURCE_DIR) + "/kernelbench/harness", req.string()}, env,
                         std::chrono::seconds(600));
    EXPECT_EQ(rc, 0) << out;
    std::ifstream in(res);
    if (rc != 0 || !in) return nullptr;
    return nlohmann::json::parse(in, nullptr, false);
  }

  fs::path dir_;
  int runs_ = 0;
};

}  // namespace ak::kernelbench::testing
