// The GPU half of "a starter printed by `autokernel starter` is submitted unchanged and passes"
// (issue 22): for every kernel type with a cuda or triton backend, the CLI prints the starter, a
// campaign names it as its source_file, `autokernel check` accepts the campaign and `submit --wait`
// runs it on a real farm with one cuda worker: every row must PASS. Label gpu: skips only where the
// machine has no GPU; where it has one, a worker or sandbox that cannot use it fails the test.
#include <fstream>
#include <string>

#include "common/protocol.h"
#include "kernels/registry.h"
#include "tests/gpu_present.h"
#include "tests/integration/farm.h"

namespace ak::testing {
namespace {

TEST(StarterGpuTest, EveryCudaAndTritonStarterPrintedByTheCliIsSubmittedUnchangedAndPasses) {
  if (!gpu_present()) GTEST_SKIP() << kNoGpu;
  Farm farm;
  farm.start_coordinator();
  farm.start_worker("g0", 4, "cuda");
  farm.wait_workers(1);
  const std::string log = farm.dir() + "/submit.txt";
  size_t jobs = 0;
  for (const kernels::KernelSpec* k : kernels::all()) {
    for (const Backend backend : {Backend::kCuda, Backend::kTriton}) {
      if (!k->backends.count(backend)) continue;
      const std::string b = backend_name(backend);
      const std::string file = k->name + "_" + b + (backend == Backend::kTriton ? "_starter.py" : "_starter.cu");
      ASSERT_EQ(run_autokernel_to({"starter", k->name, "--backend", b}, farm.dir() + "/" + file), 0)
          << read_text(farm.dir() + "/" + file);
      // The smallest edge shape (odd sizes: the kernels' bounds checks), in fp32 and bf16.
      const std::string campaign = farm.dir() + "/" + k->name + "_" + b + ".json";
      std::ofstream(campaign) << nlohmann::json{
          {"name", k->name + "-" + b + "-starter"},
          {"backend", b},
          {"kernel_type", k->name},
          {"source_file", file},
          {"shapes", {k->edge_shapes.back()}},
          {"dtypes", {"fp32", "bf16"}},
          {"configs", "default"},
          {"timeout_ms", 120000}}.dump();
      ASSERT_EQ(run_autokernel_to({"check", campaign}, log), 0) << read_text(log);
      ASSERT_EQ(run_autokernel_to({"submit", campaign, "--wait", "--client", farm.client_endpoint()}, log), 0)
          << read_text(log);
      EXPECT_NE(read_text(log).find(") is done: 2 of 2 jobs finished, 2 PASS, 0 not PASS"), std::string::npos)
          << k->name << " " << b << ":\n"
          << read_text(log);
      jobs += 2;
    }
  }
  ASSERT_GE(jobs, 2u * (11 + 8)) << "every GPU type has a cuda starter, the row-wise types and matmul a triton one";
  const StoreSnapshot snap = farm.snapshot();
  ASSERT_EQ(snap.results.size(), jobs);
  for (const auto& r : snap.results)
    EXPECT_EQ(r.status, ResultStatus::kPass) << r.job_id << " " << r.stage << ": " << r.reason;
}

}  // namespace
}  // namespace ak::testing
