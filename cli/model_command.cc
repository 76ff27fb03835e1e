// autokernel profile: a model's profile as a farm job (coordinator/model_campaign.h), printed as a
// ranked table (what costs the device time, classified into kernel types, with the roofline bound)
// and written as JSON.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/extract.h"
#include "cli/format.h"
#include "common/stop_signal.h"
#include "coordinator/client.h"
#include "coordinator/model_campaign.h"

namespace ak::cli {

namespace fs = std::filesystem;
using nlohmann::json;
namespace pr = protocol;

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s.empty() ? "-" : s;
}

std::string layout_text(const json& layout) {
  std::string s;
  if (layout.is_object())
    for (const auto& [k, v] : layout.items()) s += " " + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
  return s;
}

void print_profile(const pr::ModelProfile& p, int top) {
  std::printf("%s on %s, %s, %s\n", p.model.c_str(), p.gpu.value_or(p.device).c_str(), p.dtype.c_str(), p.mode.c_str());
  std::printf("%6s  %10s  %5s  %-22s %-7s %-5s %s\n", "share", "us/iter", "calls", "type", "bound", "dtype",
              "op and shape");
  int n = 0;
  for (const auto& o : p.ops) {
    if (n++ >= top) break;
    std::printf("%5.1f%%  %10.1f  %5.0f  %-22s %-7s %-5s %s %s%s\n", 100 * o.share, o.us_per_iter, o.calls_per_iter,
                o.kernel_type.c_str(), o.bound.c_str(), o.dtype.c_str(), o.op.c_str(), shape_text(o.shape).c_str(),
                layout_text(o.layout).c_str());
  }
  double covered = 0;
  for (const auto& t : p.targets) covered += t.share;
  std::printf("total %.1f us per iteration; %zu targets cover %.1f%%; unattributed %.1f us\n",
              p.total_us_per_iter.value_or(0), p.targets.size(), 100 * covered, p.unattributed_us_per_iter.value_or(0));
  if (!p.uncovered.empty()) {
    std::printf("not covered by a kernel type:");
    int k = 0;
    for (const auto& u : p.uncovered) {
      if (k++ >= 6) break;
      std::printf(" %s %.1f%%", u.op.c_str(), 100 * u.share);
    }
    std::printf("\n");
  }
}

}  // namespace

int profile(const ClientArgs& c, const ProfileArgs& a) {
  json doc = {{"kind", "model"},      {"task", "profile"}, {"backend", a.backend}, {"dtype", a.dtype},
              {"compile", a.compile}, {"iters", a.iters},  {"warmup", a.warmup},   {"timeout_ms", a.timeout_ms}};
  if (a.model.rfind("examples/", 0) == 0 || a.model.rfind("hf:", 0) == 0) {
    doc["model"] = a.model;
  } else {
    // A user's file: its text travels in the document, under its plain name.
    std::error_code ec;
    if (!fs::is_regular_file(a.model, ec)) {
      std::cerr << "autokernel profile: " << a.model
                << " is not a regular file; name a model file, examples/NAME[:CONFIG] or hf:ARCH\n";
      return 2;
    }
    std::ifstream in(a.model, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    doc["model"] = fs::path(a.model).filename().string();
    doc["model_code"] = text.str();
  }
  if (!a.gpu_model.empty()) doc["gpu_models"] = {a.gpu_model};
  if (std::string why = check_model_name(doc["model"].get<std::string>()); !why.empty()) {
    std::cerr << "autokernel profile: model '" << doc["model"].get<std::string>() << "': " << why << "\n";
    return 2;
  }
  CoordinatorClient client(c.endpoint, std::chrono::milliseconds(c.timeout_ms), c.curve);
  auto sub = client.submit(doc);
  if (!sub.ok()) {
    std::cerr << "autokernel profile: campaign rejected: " << sub.status().message() << "\n";
    return 1;
  }
  std::cerr << "campaign " << sub->campaign_id << " (" << sub->name << "): " << sub->jobs << " profile job(s)\n";
  // A job no connected worker can run waits until one connects: say so rather than wait silently.
  if (auto st = client.status(); st.ok()) {
    bool runnable = false;
    std::string seen;
    for (const auto& w : st->workers) {
      seen += (seen.empty() ? "" : ", ") + w.worker_id + " (" + w.gpu + ")";
      const bool backend = std::find(w.backends.begin(), w.backends.end(), a.backend) != w.backends.end();
      std::string want = a.gpu_model, have = w.gpu;
      for (auto* t : {&want, &have})
        std::transform(t->begin(), t->end(), t->begin(), [](unsigned char ch) { return std::tolower(ch); });
      runnable = runnable || (backend && (want.empty() || want == have));
    }
    if (!runnable)
      std::cerr << "autokernel profile: no connected worker runs the " << a.backend << " backend"
                << (a.gpu_model.empty() ? "" : " on " + a.gpu_model)
                << " (connected: " << (seen.empty() ? "none" : seen)
                << "); the job waits in the queue until one connects\n";
  }
  const auto deadline =
      a.wait_s > 0 ? std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                            std::chrono::duration<double>(std::min(a.wait_s, 3.2e7)))
                   : std::chrono::steady_clock::time_point::max();
  const bool complete = wait_for_campaign(client, sub->campaign_id, stop_flag(), deadline);
  if (!complete)
    std::cerr << "autokernel profile: stopped waiting for campaign " << sub->campaign_id
              << "; its job goes on in the farm (autokernel results --campaign " << sub->campaign_id << ")\n";
  auto rows = client.results(sub->campaign_id, "");
  if (!rows.ok()) {
    std::cerr << "autokernel profile: coordinator lost: " << rows.status().message() << "\n";
    return 1;
  }
  int rc = complete ? 0 : 1;
  json out = json::array();
  for (const auto& r : rows->rows) {
    if (r.model) out.push_back(r.model->raw);
    if (r.correctness != "PASS") {
      std::cerr << "autokernel profile: " << r.job_id << " " << r.correctness << " at " << r.stage << ": " << r.reason
                << "\n";
      rc = 1;
      continue;
    }
    if (r.model) print_profile(*r.model, a.top);
  }
  if (!a.json_out.empty()) {
    if (Status s = write_file(a.json_out, out.dump(1) + "\n"); !s.ok()) {
      std::cerr << "autokernel profile: " << s.message() << "\n";
      return 1;
    }
    std::cerr << "profile written to " << a.json_out << "\n";
  }
  return rc;
}

int extract(const ExtractArgs& a) {
  std::ifstream in(a.profile);
  if (!in) {
    std::cerr << "autokernel extract: cannot read " << a.profile << "\n";
    return 2;
  }
  const json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    std::cerr << "autokernel extract: " << a.profile << " is not JSON; expected `autokernel profile --json` output\n";
    return 2;
  }
  // `profile --json` writes an array (one profile per GPU model); a single document also does.
  json list = doc;
  if (!list.is_array()) list = json::array({doc});
  const json* first = nullptr;
  for (const json& d : list)
    if (d.is_object() && d.contains("targets")) {
      if (first) {
        std::cerr << "autokernel extract: " << a.profile << " holds several profiles; extracting the first\n";
        break;
      }
      first = &d;
    }
  if (!first) {
    std::cerr << "autokernel extract: " << a.profile << " holds no profile with targets (a failed profile?)\n";
    return 2;
  }
  auto p = protocol::parse_model_profile(*first);
  if (!p.ok()) {
    std::cerr << "autokernel extract: " << p.status().message() << "\n";
    return 2;
  }
  ExtractOptions o;
  o.backend = a.backend;
  o.gpu_model = a.gpu_model;
  o.min_share = a.min_share;
  o.budget_trials = a.budget_trials;
  const Extraction x = cli::extract(*p, o);
  std::printf("%s (%s, %s): %zu targets\n", p->model.c_str(), p->dtype.c_str(), p->mode.c_str(), x.targets.size());
  std::printf("%6s  %-22s %-20s %-5s %s\n", "share", "type", "shape", "dtype", "kept / why not");
  for (const auto& e : x.targets)
    std::printf("%5.1f%%  %-22s %-20s %-5s %s\n", 100 * e.target.share, e.target.kernel_type.c_str(),
                shape_text(e.target.shape).c_str(), e.target.dtype.c_str(), e.kept ? "kept" : e.why.c_str());
  // Amdahl's law: the most the kept targets can give, were they to take no time at all.
  std::printf("kept %.1f%% of the device time: at most %.2fx end to end from these targets\n", 100 * x.kept_share,
              x.kept_share < 1 ? 1 / (1 - x.kept_share) : 0.0);
  if (x.campaign.is_null()) {
    std::cerr << "autokernel extract: no target kept; nothing written\n";
    return 1;
  }
  if (a.out.empty()) {
    std::cout << x.campaign.dump(1) << "\n";
    return 0;
  }
  if (Status s = write_file(a.out, x.campaign.dump(1) + "\n"); !s.ok()) {
    std::cerr << "autokernel extract: " << s.message() << "\n";
    return 1;
  }
  std::printf("study campaign written to %s; run it with: autokernel submit %s --wait\n", a.out.c_str(), a.out.c_str());
  return 0;
}

}  // namespace ak::cli
