// The model pipeline on a real farm of CPU workers (redis-server, coordinator, worker
// processes, the pipeline's Python as their subprocesses): `autokernel profile` of an example, `extract`
// of its targets into a study campaign and the studies run by the farm; `profile` of
// a user's file gives the ranked table and its JSON, each op counted once; a model that cannot be
// loaded and one that hangs end with a clear reason, and the farm keeps serving.
#include <filesystem>
#include <fstream>
#include <set>

#include "tests/integration/farm.h"

namespace ak::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TEST(ModelFarmTest, ProfileThenExtractThenTheStudiesRunOnCpuWorkersAndBadModelsEndWithTheirCause) {
  Farm farm;
  farm.start_coordinator();
  farm.start_worker("m0", 1);
  farm.wait_workers(1);
  const fs::path out = fs::path(farm.dir()) / "llama.json";
  const fs::path table = fs::path(farm.dir()) / "llama.txt";
  const std::vector<std::string> common = {"--backend", "cpu",      "--dtype", "fp32",     "--iters",
                                           "2",         "--warmup", "1",       "--client", farm.client_endpoint()};
  std::vector<std::string> args = {"profile", "--model", "examples/llama:tiny", "--json", out.string()};
  args.insert(args.end(), common.begin(), common.end());
  ASSERT_EQ(run_autokernel_to(args, table.string()), 0) << read_text(table.string());
  const std::string printed = read_text(table.string());
  EXPECT_NE(printed.find("examples/llama:tiny on cpu, fp32, eager"), std::string::npos) << printed;
  EXPECT_NE(printed.find("fused_mlp"), std::string::npos) << printed;
  EXPECT_NE(printed.find("rotary_embedding"), std::string::npos) << printed;
  const json profiles = json::parse(read_text(out.string()));
  ASSERT_EQ(profiles.size(), 1u);
  const json& p = profiles[0];
  double sum = 0;
  for (const auto& op : p["ops"]) sum += op["us_per_iter"].get<double>();
  EXPECT_NEAR(sum, p["total_us_per_iter"].get<double>(), 0.01 * p["total_us_per_iter"].get<double>());

  // Extract: the profile's targets with their shares as a study campaign, then the studies on the
  // farm (what a kernel type's CPU backend takes; fused_mlp and attention have none).
  const fs::path study = fs::path(farm.dir()) / "study.json";
  ASSERT_EQ(run_autokernel_to({"extract", "--profile", out.string(), "--backend", "cpu", "--min-share", "0",
                               "--budget-trials", "2", "--out", study.string()},
                              table.string()),
            0)
      << read_text(table.string());
  EXPECT_NE(read_text(table.string()).find("fused_mlp has no cpu backend"), std::string::npos)
      << read_text(table.string());
  const json campaign = json::parse(read_text(study.string()));
  std::set<std::string> types;
  for (const auto& t : campaign["targets"]) types.insert(t["kernel_type"].get<std::string>());
  // The decoder's RMSNorm at eps 1e-5 is the rmsnorm_e5 type.
  EXPECT_EQ(types, (std::set<std::string>{"matmul", "rotary_embedding", "rmsnorm_e5"}));
  ASSERT_EQ(run_autokernel_to(
                {"submit", study.string(), "--wait", "--allow-source-outside", "--client", farm.client_endpoint()},
                table.string()),
            0)
      << read_text(table.string());
  auto rows = farm.client().results(protocol::ResultsQuery{"", "", "", "", ""});
  ASSERT_TRUE(rows.ok());
  int passed = 0;
  for (const auto& r : rows->rows) passed += r.kernel_type != "model" && r.correctness == "PASS";
  EXPECT_GE(passed, int(campaign["targets"].size())) << "every study measures at least its starter";

  // Verify: what the studies tuned, from the farm's tuning database, plugged into the model on a
  // worker (every kernel, slower than PyTorch's or not: a correctness check of each).
  const fs::path report = fs::path(farm.dir()) / "verify.json";
  args = {"verify", "--model",      "examples/llama:tiny", "--profile", out.string(), "--min-speedup",
          "0",      "--no-compile", "--decode-tokens",     "4",         "--json",     report.string()};
  args.insert(args.end(), common.begin(), common.end());
  ASSERT_EQ(run_autokernel_to(args, table.string()), 0) << read_text(table.string());
  EXPECT_NE(read_text(table.string()).find("outputs match"), std::string::npos) << read_text(table.string());
  const json verified = json::parse(read_text(report.string()));
  ASSERT_EQ(verified.size(), 1u);
  const json& v = verified[0];
  EXPECT_TRUE(v["outputs"]["pass"].get<bool>()) << v["outputs"].dump();
  EXPECT_TRUE(v["decode"]["identical"].get<bool>()) << v["decode"].dump();
  std::set<std::string> replaced;
  for (const auto& x : v["replaced"]) replaced.insert(x["kernel_type"].get<std::string>());
  EXPECT_TRUE(replaced.count("matmul")) << v["replaced"].dump();
  // The example's apply_rotary_pos_emb, as Hugging Face's LLaMA names it (models/plug.py).
  EXPECT_TRUE(replaced.count("rotary_embedding")) << v["replaced"].dump();
  // The decoder's RMSNorm (eps 1e-5), by the kernel tuned for its eps.
  EXPECT_TRUE(replaced.count("rmsnorm_e5")) << v["replaced"].dump();
  EXPECT_FALSE(replaced.count("rmsnorm")) << v["replaced"].dump();
  EXPECT_FALSE(v["predicted_speedup"].is_null());

  // A user's file (KernelBench's contract), a file that raises on import, and one that hangs.
  const std::string models = std::string(AK_SOURCE_DIR) + "/tests/models/models";
  args = {"profile", "--model", models + "/small_cnn.py"};
  args.insert(args.end(), common.begin(), common.end());
  EXPECT_EQ(run_autokernel_to(args, table.string()), 0) << read_text(table.string());
  EXPECT_NE(read_text(table.string()).find("aten::conv2d"), std::string::npos) << read_text(table.string());

  args = {"profile", "--model", models + "/raises_on_import.py"};
  args.insert(args.end(), common.begin(), common.end());
  EXPECT_EQ(run_autokernel_to(args, table.string()), 1);
  EXPECT_NE(read_text(table.string()).find("FAIL at model: model file"), std::string::npos)
      << read_text(table.string());
  EXPECT_NE(read_text(table.string()).find("RuntimeError: this model file is broken on purpose"), std::string::npos);

  const fs::path hangs = fs::path(farm.dir()) / "hangs.py";
  std::ofstream(hangs) << "import torch\nclass Net(torch.nn.Module):\n    def forward(self, x):\n"
                          "        while True:\n            x = x + 1\n"
                          "def build_model():\n    return Net()\ndef example_inputs():\n    return (torch.zeros(2),)\n";
  args = {"profile", "--model", hangs.string(), "--job-timeout-ms", "5000"};
  args.insert(args.end(), common.begin(), common.end());
  EXPECT_EQ(run_autokernel_to(args, table.string()), 1);
  EXPECT_NE(read_text(table.string()).find("TIMEOUT at model"), std::string::npos) << read_text(table.string());

  // A name the coordinator refuses never reaches a worker.
  args = {"profile", "--model", "examples/../../etc/passwd"};
  args.insert(args.end(), common.begin(), common.end());
  EXPECT_EQ(run_autokernel_to(args, table.string()), 2);
  EXPECT_NE(read_text(table.string()).find("an example is named examples/NAME"), std::string::npos)
      << read_text(table.string());

  // A profile no connected worker can run (cuda, on a farm of CPU workers) says so and stops
  // waiting when told.
  args = {"profile",  "--model", "examples/gpt2:tiny", "--backend",           "cuda",
          "--wait-s", "1",       "--client",           farm.client_endpoint()};
  EXPECT_EQ(run_autokernel_to(args, table.string()), 1);
  EXPECT_NE(read_text(table.string()).find("no connected worker runs the cuda backend (connected: m0"),
            std::string::npos)
      << read_text(table.string());
  EXPECT_NE(read_text(table.string()).find("its job goes on in the farm"), std::string::npos);

  // The worker still serves: the example again.
  args = {"profile", "--model", "examples/gpt2:tiny"};
  args.insert(args.end(), common.begin(), common.end());
  EXPECT_EQ(run_autokernel_to(args, table.string()), 0) << read_text(table.string());
}

// `autokernel run --model`: the whole pipeline unattended on a farm `run` starts itself (a private
// Redis, a coordinator and two CPU workers): profile, extract, the studies, verify, with the
// reports written and the wall time printed; for an example language model and for a user's file
// that is not among the examples (a small CNN in KernelBench's contract).
TEST(ModelFarmTest, RunModelDoesProfileExtractOptimizeAndVerifyUnattended) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("run_model_" + std::to_string(::getpid()));
  const std::string cnn = std::string(AK_SOURCE_DIR) + "/tests/models/models/small_cnn.py";
  for (const std::string& model : {std::string("examples/gpt2:tiny"), cnn}) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    const fs::path log = dir / "run.txt";
    const int rc =
        run_autokernel_to({"run", "--model", model, "--backend", "cpu", "--cpu-workers", "2", "--budget-trials", "2",
                           "--verify-iters", "3", "--no-compile", "--min-speedup", "0",
                           // every target, whatever its share: on a loaded 2-core
                           // machine the CNN's convolutions took 99.8% of the time
                           // and its linear layer fell below the default 0.5%
                           "--min-share", "0", "--data-dir", (dir / "ak").string(), "--out", (dir / "out").string(),
                           "--metrics", "127.0.0.1:0"},
                          log.string());
    const std::string printed = read_text(log.string());
    ASSERT_EQ(rc, 0) << model << "\n" << printed;
    for (const char* step :
         {"== 1/4 profile", "== 2/4 extract", "== 3/4 optimize", "== 4/4 verify", "wall time: profile"})
      EXPECT_NE(printed.find(step), std::string::npos) << model << ": " << step << "\n" << printed;
    const json v = json::parse(read_text((dir / "out" / "verify.json").string()));
    ASSERT_EQ(v.size(), 1u) << model;
    EXPECT_TRUE(v[0]["outputs"]["pass"].get<bool>()) << model << v[0]["outputs"].dump();
    EXPECT_FALSE(v[0]["replaced"].empty()) << model << v[0].dump();
    if (model == cnn) {
      EXPECT_FALSE(v[0].contains("decode")) << "not a language model";
    } else {
      EXPECT_TRUE(v[0]["decode"]["identical"].get<bool>());
    }
    EXPECT_TRUE(fs::exists(dir / "out" / "profile.json"));
    EXPECT_TRUE(fs::exists(dir / "out" / "model-study.json"));
    // What verify plugged in, as `autokernel best --export` writes it (for export --hf).
    const json tuned = json::parse(read_text((dir / "out" / "tuned.json").string()));
    EXPECT_EQ(tuned["format"], 1) << model;
    EXPECT_FALSE(tuned["entries"].empty()) << model;
    EXPECT_TRUE(fs::exists(dir / "out" / "results.tsv"));
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ak::testing
