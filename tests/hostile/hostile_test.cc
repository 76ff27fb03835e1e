// The hostile-kernel suite: every candidate in tests/hostile/<backend>/ declares the verdict the
// farm must give it (first lines, "// expect-status: A|B" and "// expect-stage: prefix|prefix"
// or "-"). The test runs them all through a real farm (redis-server, coordinator, one worker
// process) as one campaign each, then checks every verdict and that the one worker served every
// job: a hostile candidate costs at most its own sandbox.
//
// The farm compiles a candidate as one source with no include path, so the code the candidates
// share lives in a prelude next to them (cuda/prelude.cuh, cpu/prelude.h; not candidates, since
// only *.cu and *.cc are loaded) and the runner inlines it: a line that is exactly
// `#include "prelude.cuh"` or `#include "prelude.h"` is replaced by that file from the
// candidate's folder before the source goes into the campaign. A missing prelude fails the test.
//
//   ctest -R Hostile           # cpu suite (CI) and, where there is a GPU, the cuda suite (label gpu)
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "tests/gpu_present.h"
#include "tests/integration/farm.h"

namespace ak::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct Expectation {
  std::string file;
  std::string name;                 // file stem, e.g. "07_caches_results"
  std::vector<std::string> statuses;
  std::vector<std::string> stages;  // prefixes; empty: any (PASS)
  std::string source;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

// `source` with every line that is exactly `#include "prelude.cuh"` or `#include "prelude.h"`
// replaced by the text of that file in `dir`; other lines stay as they are. A prelude that is not
// there adds a failure (naming `file`, the candidate) and leaves its line in place.
std::string inline_preludes(const std::string& source, const fs::path& dir, const std::string& file) {
  static const char* const kPreludes[] = {"prelude.cuh", "prelude.h", "escape.h"};
  std::string out;
  size_t pos = 0;
  while (pos < source.size()) {
    const size_t eol = source.find('\n', pos);
    const size_t end = eol == std::string::npos ? source.size() : eol;
    const size_t next = eol == std::string::npos ? source.size() : eol + 1;
    const std::string line = source.substr(pos, end - pos);
    const char* prelude = nullptr;
    for (const char* p : kPreludes)
      if (line == std::string("#include \"") + p + "\"") prelude = p;
    if (prelude == nullptr) {
      out.append(source, pos, next - pos);
    } else if (const fs::path path = dir / prelude; !fs::is_regular_file(path)) {
      ADD_FAILURE() << file << " includes " << prelude << ", but " << path.string()
                    << " does not exist; add it or inline the code into the candidate";
      out.append(source, pos, next - pos);
    } else {
      std::string text = read_text(path.string());
      if (eol != std::string::npos && (text.empty() || text.back() != '\n')) text += '\n';
      out += text;
    }
    pos = next;
  }
  return out;
}

std::vector<Expectation> load_suite(const std::string& backend) {
  std::vector<Expectation> suite;
  const fs::path dir = fs::path(AK_SOURCE_DIR) / "tests" / "hostile" / backend;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string ext = entry.path().extension().string();
    if (ext != ".cu" && ext != ".cc") continue;
    Expectation e;
    e.file = entry.path().string();
    e.name = entry.path().stem().string();
    e.source = read_text(e.file);
    std::istringstream in(e.source);
    std::string line;
    while (std::getline(in, line) && line.rfind("//", 0) == 0) {
      if (line.rfind("// expect-status:", 0) == 0) e.statuses = split(line.substr(17), '|');
      if (line.rfind("// expect-stage:", 0) == 0) {
        auto st = split(line.substr(16), '|');
        if (!(st.size() == 1 && st[0] == "-")) e.stages = st;
      }
    }
    if (e.statuses.empty()) ADD_FAILURE() << e.file << " has no '// expect-status:' line";
    // After the header is read: the prelude's own leading comment must not count as header.
    e.source = inline_preludes(e.source, dir, e.file);
    suite.push_back(std::move(e));
  }
  std::sort(suite.begin(), suite.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return suite;
}

json campaign_for(const Expectation& e, const std::string& backend) {
  const bool gpu = backend == "cuda";
  return {{"name", "hostile-" + backend + "-" + e.name},
          {"kernel_type", "softmax"},
          {"backend", backend},
          {"source", e.source},
          {"configs", "default"},
          {"shapes", {gpu ? std::vector<int64_t>{1024, 4096} : std::vector<int64_t>{64, 1024}}},
          {"dtypes", {"fp32"}},
          {"tag", "hostile/" + backend + "/" + e.name},
          {"description", e.name},
          {"timeout_ms", gpu ? 30000 : 20000},
          // At least 60 timed samples: the "smart" cheaters start cheating after 40 calls.
          {"measure", {{"warmup", 3}, {"min_samples", 60}, {"max_samples", 120}, {"max_time_ms", 3000}}}};
}

void run_suite(const std::string& backend) {
  const std::vector<Expectation> suite = load_suite(backend);
  ASSERT_GE(suite.size(), backend == "cuda" ? 17u : 21u) << "the suite lost candidates";
  Farm::Options fo;
  fo.lease_ms = 120'000;        // a hostile job may hold its sandbox until its own timeout
  fo.worker_timeout_ms = 60'000;
  fo.max_attempts = 1;          // a verdict is final: no retry elsewhere
  Farm farm(fo);
  farm.start_coordinator();
  farm.start_worker("hostile-" + backend, 1, backend);
  farm.wait_workers(1);
  std::map<std::string, std::string> campaign_of;  // campaign id -> candidate name
  for (const auto& e : suite) campaign_of[farm.submit(campaign_for(e, backend))] = e.name;
  farm.wait_status(
      [&](const json& s) {
        size_t done = 0;
        for (const auto& c : s["campaigns"])
          if (campaign_of.count(c["campaign_id"]) && c["finished"] == c["total"]) ++done;
        return done == campaign_of.size();
      },
      std::chrono::seconds(backend == "cuda" ? 900 : 600), "every hostile campaign");

  const StoreSnapshot snap = farm.snapshot();
  std::map<std::string, std::string> job_campaign;
  for (const auto& j : snap.jobs) job_campaign[j.spec.job_id] = j.spec.campaign_id;
  std::map<std::string, const ResultRecord*> result_of;  // candidate name -> its row
  std::set<std::string> workers;
  for (const auto& r : snap.results) {
    auto c = campaign_of.find(job_campaign[r.job_id]);
    if (c == campaign_of.end()) continue;
    EXPECT_EQ(result_of.count(c->second), 0u) << c->second << " has more than one row";
    result_of[c->second] = &r;
    workers.insert(r.worker_id);
  }
  std::cout << "hostile suite, backend " << backend << ":\n";
  for (const auto& e : suite) {
    auto it = result_of.find(e.name);
    if (it == result_of.end()) {
      ADD_FAILURE() << e.name << ": no result";
      continue;
    }
    const ResultRecord& r = *it->second;
    const std::string status = result_status_name(r.status);
    std::cout << "  " << e.name << ": " << status << " at " << r.stage << " (expected "
              << e.statuses[0] << (e.statuses.size() > 1 ? "|" + e.statuses[1] : "") << ")  " << r.reason.substr(0, 160)
              << "\n";
    EXPECT_NE(std::find(e.statuses.begin(), e.statuses.end(), status), e.statuses.end())
        << e.name << ": got " << status << " at stage " << r.stage << ": " << r.reason;
    if (!e.stages.empty()) {
      bool match = false;
      for (const auto& p : e.stages) match = match || r.stage.rfind(p, 0) == 0;
      EXPECT_TRUE(match) << e.name << ": stage " << r.stage << " is not one of the expected (" << e.stages[0]
                         << "...): " << r.reason;
    }
    // A host file's text never reaches a result (23: an absolute include of /etc/passwd).
    EXPECT_EQ(r.reason.find("root:x:0:0"), std::string::npos) << e.name << ": " << r.reason;
    if (r.status == ResultStatus::kPass) {
      EXPECT_GT(r.m.latency_us, 0);
      EXPECT_NE(r.m.verification.find("edge PASS"), std::string::npos) << r.m.verification;
    } else {
      EXPECT_EQ(r.m.latency_us, 0) << e.name << ": a candidate that did not pass is never timed";
    }
  }
  // One worker process served the whole suite: no candidate killed it.
  EXPECT_EQ(workers, std::set<std::string>{"hostile-" + backend});
  // Nothing a candidate started outlived its job (17 names its daemon ak-hostile-dmn).
  for (const auto& p : fs::directory_iterator("/proc")) {
    std::ifstream comm(p.path() / "comm");
    std::string name;
    if (comm && std::getline(comm, name)) {
      EXPECT_NE(name, "ak-hostile-dmn") << "a candidate's daemon outlived its job: pid " << p.path().filename();
    }
  }
}

// One test name per backend: ctest keys labels by test name.
#define AK_HOSTILE_CAT2(a, b) a##b
#define AK_HOSTILE_CAT(a, b) AK_HOSTILE_CAT2(a, b)
TEST(Hostile, AK_HOSTILE_CAT(AK_HOSTILE_TEST_PREFIX, SuiteGetsTheExpectedVerdictsFromOneWorker)) {
  const std::string backend = AK_HOSTILE_BACKEND;
  // Skips only where the machine has no GPU: where it has one, a worker that cannot use it fails.
  if (backend == "cuda" && !gpu_present()) GTEST_SKIP() << kNoGpu;
  run_suite(backend);
}

}  // namespace
}  // namespace ak::testing
