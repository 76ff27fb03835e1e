// autokernel profile: a model's profile as a farm job (coordinator/model_campaign.h), printed as a
// ranked table (what costs the device time, classified into kernel types, with the roofline bound)
// and written as JSON.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/extract.h"
#include "cli/format.h"
#include "cli/python_env.h"
#include "common/clock.h"
#include "common/confine.h"
#include "common/file.h"
#include "common/process.h"
#include "common/stop_signal.h"
#include "common/tuning.h"
#include "coordinator/client.h"
#include "coordinator/model_campaign.h"
#include "models/pipeline_source.h"
#include "worker/compiler.h"
#include "worker/model_job_runner.h"

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

// The model campaign document of `task` for a model name or file (its text read in), or 2 with
// the reason printed.
int model_document(const std::string& verb, const std::string& model, json& doc) {
  if (model.rfind("examples/", 0) == 0 || model.rfind("hf:", 0) == 0) {
    doc["model"] = model;
  } else {
    // A user's file: its text travels in the document, under its plain name.
    std::error_code ec;
    if (!fs::is_regular_file(model, ec)) {
      std::cerr << "autokernel " << verb << ": " << model
                << " is not a regular file; name a model file, examples/NAME[:CONFIG] or hf:ARCH\n";
      return 2;
    }
    std::ifstream in(model, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    doc["model"] = fs::path(model).filename().string();
    doc["model_code"] = text.str();
  }
  if (std::string why = check_model_name(doc["model"].get<std::string>()); !why.empty()) {
    std::cerr << "autokernel " << verb << ": model '" << doc["model"].get<std::string>() << "': " << why << "\n";
    return 2;
  }
  return 0;
}

// Submits a model campaign, says when no connected worker can run it, waits (at most wait_s when
// > 0) and returns its rows; `complete` says whether the campaign ended. nullopt: an error, printed.
std::optional<std::vector<pr::ResultRow>> run_model_campaign(CoordinatorClient& client, const json& doc,
                                                             const std::string& verb, const std::string& backend,
                                                             const std::string& gpu_model, double wait_s,
                                                             bool& complete) {
  auto sub = client.submit(doc);
  if (!sub.ok()) {
    std::cerr << "autokernel " << verb << ": campaign rejected: " << sub.status().message() << "\n";
    return std::nullopt;
  }
  std::cerr << "campaign " << sub->campaign_id << " (" << sub->name << "): " << sub->jobs << " " << verb << " job(s)\n";
  // A job no connected worker can run waits until one connects: say so rather than wait silently.
  if (auto st = client.status(); st.ok()) {
    bool runnable = false;
    std::string seen;
    for (const auto& w : st->workers) {
      seen += (seen.empty() ? "" : ", ") + w.worker_id + " (" + w.gpu + ")";
      const bool has = std::find(w.backends.begin(), w.backends.end(), backend) != w.backends.end();
      runnable = runnable || (has && (gpu_model.empty() || same_gpu_model(gpu_model, w.gpu)));
    }
    if (!runnable)
      std::cerr << "autokernel " << verb << ": no connected worker runs the " << backend << " backend"
                << (gpu_model.empty() ? "" : " on " + gpu_model) << " (connected: " << (seen.empty() ? "none" : seen)
                << "); the job waits in the queue until one connects\n";
  }
  const auto deadline =
      wait_s > 0 ? std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                          std::chrono::duration<double>(std::min(wait_s, 3.2e7)))
                 : std::chrono::steady_clock::time_point::max();
  complete = wait_for_campaign(client, sub->campaign_id, stop_flag(), deadline);
  if (!complete)
    std::cerr << "autokernel " << verb << ": stopped waiting for campaign " << sub->campaign_id
              << "; its job goes on in the farm (autokernel results --campaign " << sub->campaign_id << ")\n";
  auto rows = client.results(sub->campaign_id, "");
  if (!rows.ok()) {
    std::cerr << "autokernel " << verb << ": coordinator lost: " << rows.status().message() << "\n";
    return std::nullopt;
  }
  return std::move(rows->rows);
}

std::string g3(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", v);
  return b;
}

std::string shape_json(const std::vector<int64_t>& shape) { return shape.empty() ? "" : json(shape).dump(); }

void print_verify(const protocol::ModelVerifyReport& r) {
  const protocol::ModelOutputs o = r.outputs.value_or(protocol::ModelOutputs{});
  std::printf("%s on %s, %s: outputs %s (error %.3g; the original's %.3g; limit %.3g)\n",
              r.model.empty() ? "?" : r.model.c_str(), r.gpu.value_or(r.device.empty() ? "?" : r.device).c_str(),
              r.dtype.empty() ? "?" : r.dtype.c_str(), o.pass ? "match" : "DIFFER", o.tuned_error, o.original_error,
              o.limit);
  if (r.decode) {
    const protocol::ModelDecode& d = *r.decode;
    if (d.identical)
      std::printf("greedy decoding: %d tokens identical\n", d.tokens);
    else
      std::printf("greedy decoding: parts at token %d of %d (the original's margin there %.3g)\n",
                  d.first_difference.value_or(-1), d.tokens, d.margin_at_difference.value_or(0.0));
    if (!d.identical && d.forced) {
      const protocol::ModelForcedDecode& f = *d.forced;
      // near_ties: choices within the outputs' tolerance of the original's best logit
      // (models/verify_model.py, compare_decoding).
      std::string near;
      if (f.near_ties > 0)
        near = ", " + std::to_string(f.near_ties) +
               " where the original's gap between its best logit and the tuned choice is within the outputs' "
               "tolerance (largest " +
               g3(f.largest_gap.value_or(0.0)) + " of the step's largest |logit|; tolerance " +
               g3(f.tolerance.value_or(0.0)) + ")";
      if (f.identical_but_ties)
        std::printf(
            "  along the original's tokens: %d agree, %d differ only at an exact tie of the original's best logit%s\n",
            f.agree, f.ties, near.c_str());
      else
        std::printf("  along the original's tokens: %d agree, %d ties%s, and a real difference at token %d\n", f.agree,
                    f.ties, near.c_str(), f.first_difference.value_or(-1));
    }
  }
  const auto eager_it = r.time.find("eager");
  const double eager = eager_it == r.time.end() ? 0 : eager_it->second.median_us;
  std::printf("%-8s %12s %10s %10s %9s\n", "variant", "median us", "p10", "p90", "vs eager");
  for (const char* v : {"eager", "compile", "tuned"})
    if (auto it = r.time.find(v); it != r.time.end()) {
      const double m = it->second.median_us;
      std::printf("%-8s %12.1f %10.1f %10.1f %8.3fx\n", v, m, it->second.p10_us, it->second.p90_us,
                  m > 0 ? eager / m : 0.0);
    }
  if (r.graph_speedup)
    std::printf("device time (each forward in a CUDA graph): eager %.1f us, tuned %.1f us, %.3fx\n",
                r.graph_eager.value_or(protocol::ModelTiming{}).median_us,
                r.graph_tuned.value_or(protocol::ModelTiming{}).median_us, *r.graph_speedup);
  if (r.predicted_speedup)
    std::printf("predicted (Amdahl over the replaced kernels) %.3fx; measured %.3fx against eager%s\n",
                *r.predicted_speedup, r.speedup_vs_eager.value_or(0.0),
                r.speedup_vs_compile
                    ? (", " + std::to_string(*r.speedup_vs_compile).substr(0, 5) + "x against torch.compile").c_str()
                    : "");
  int calls = 0;
  for (const auto& x : r.replaced) calls += x.calls_per_forward;
  std::printf("replaced %d calls per forward:\n", calls);
  for (const auto& x : r.replaced)
    std::printf("  %-32s %-22s %-20s x%d\n", x.function.c_str(), x.kernel_type.c_str(), shape_json(x.shape).c_str(),
                x.calls_per_forward);
  int k = 0;
  for (const auto& x : r.fallbacks)
    if (k++ < 8) std::printf("  fallback %-23s %s x%d\n", x.function.c_str(), x.reason.c_str(), x.calls_per_forward);
  for (const auto& x : r.kernels_skipped)
    std::printf("  kernel left out: %s %s: %s\n", x.kernel_type.c_str(), shape_json(x.shape).c_str(), x.reason.c_str());
}

Status write_reports(const std::string& path, const json& out) {
  if (path.empty()) return Status::ok_status();
  return write_file(path, out.dump(1) + "\n");
}

}  // namespace

int profile(const ClientArgs& c, const ProfileArgs& a) {
  json doc = {{"kind", "model"},      {"task", "profile"}, {"backend", a.backend}, {"dtype", a.dtype},
              {"compile", a.compile}, {"iters", a.iters},  {"warmup", a.warmup},   {"timeout_ms", a.timeout_ms}};
  if (int rc = model_document("profile", a.model, doc); rc != 0) return rc;
  if (!a.gpu_model.empty()) doc["gpu_models"] = {a.gpu_model};
  CoordinatorClient client(c.endpoint, std::chrono::milliseconds(c.timeout_ms), c.curve);
  bool complete = false;
  auto rows = run_model_campaign(client, doc, "profile", a.backend, a.gpu_model, a.wait_s, complete);
  if (!rows) return 1;
  int rc = complete ? 0 : 1;
  json out = json::array();
  for (const auto& r : *rows) {
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
    if (Status s = write_reports(a.json_out, out); !s.ok()) {
      std::cerr << "autokernel profile: " << s.message() << "\n";
      return 1;
    }
    std::cerr << "profile written to " << a.json_out << "\n";
  }
  return rc;
}

namespace {

// A JSON file, or nullopt with the reason printed.
std::optional<json> read_json(const std::string& verb, const std::string& path, const char* what) {
  std::ifstream in(path);
  if (!in) {
    std::cerr << "autokernel " << verb << ": cannot read " << path << "\n";
    return std::nullopt;
  }
  json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    std::cerr << "autokernel " << verb << ": " << path << " is not JSON; expected " << what << "\n";
    return std::nullopt;
  }
  return doc;
}

// The targets of the first profile in `doc` (`profile --json` writes an array).
// The profiles with targets in `profile --json` output (an array, one profile per GPU model; a
// single document also does).
std::vector<const json*> profiles_in(const json& doc) {
  std::vector<const json*> out;
  if (!doc.is_array()) {
    if (doc.is_object() && doc.contains("targets")) out.push_back(&doc);
    return out;
  }
  for (const json& d : doc)
    if (d.is_object() && d.contains("targets")) out.push_back(&d);
  return out;
}

json profile_targets(const json& doc) {
  const auto profiles = profiles_in(doc);
  return profiles.empty() || !(*profiles[0])["targets"].is_array() ? json::array() : (*profiles[0])["targets"];
}

// The extraction's table and the Amdahl bound of what it keeps.
void print_extraction(const Extraction& x) {
  std::printf("%6s  %-22s %-20s %-5s %s\n", "share", "type", "shape", "dtype", "kept / why not");
  for (const auto& e : x.targets)
    std::printf("%5.1f%%  %-22s %-20s %-5s %s\n", 100 * e.target.share, e.target.kernel_type.c_str(),
                shape_text(e.target.shape).c_str(), e.target.dtype.c_str(), e.kept ? "kept" : e.why.c_str());
  // Amdahl's law: the most the kept targets can give, were they to take no time at all.
  std::printf("kept %.1f%% of the device time: at most %.2fx end to end from these targets\n", 100 * x.kept_share,
              x.kept_share < 1 ? 1 / (1 - x.kept_share) : 0.0);
}

int verify_with(CoordinatorClient& client, const VerifyArgs& a, const json& tuned, const json& targets, json& reports) {
  json doc = {{"kind", "model"},
              {"task", "verify"},
              {"backend", a.backend},
              {"dtype", a.dtype},
              {"compile", a.compile},
              {"iters", a.iters},
              {"warmup", a.warmup},
              {"decode_tokens", a.decode_tokens},
              {"min_speedup", a.min_speedup},
              {"timeout_ms", a.timeout_ms},
              {"tuned", tuned},
              {"targets", targets}};
  if (int rc = model_document("verify", a.model, doc); rc != 0) return rc;
  if (!a.gpu_model.empty()) doc["gpu_models"] = {a.gpu_model};
  bool complete = false;
  auto rows = run_model_campaign(client, doc, "verify", a.backend, a.gpu_model, a.wait_s, complete);
  if (!rows) return 1;
  int rc = complete ? 0 : 1;
  for (const auto& r : *rows) {
    if (r.model) {
      reports.push_back(r.model->raw);
      if (auto report = protocol::parse_model_verify(r.model->raw); !report.ok())
        std::cerr << "autokernel verify: " << r.job_id << ": " << report.status().message() << "\n";
      else if (report->outputs)
        print_verify(*report);
    }
    if (r.correctness != "PASS") {
      std::cerr << "autokernel verify: " << r.job_id << " " << r.correctness << " at " << r.stage << ": " << r.reason
                << "\n";
      rc = 1;
    }
  }
  return rc;
}

}  // namespace

int verify(const ClientArgs& c, const VerifyArgs& a) {
  CoordinatorClient client(c.endpoint, std::chrono::milliseconds(c.timeout_ms), c.curve);
  json tuned;
  if (!a.tuned.empty()) {
    auto doc = read_json("verify", a.tuned, "`autokernel best --export` output");
    if (!doc) return 2;
    auto entries = parse_tuning_export(*doc);
    if (!entries.ok()) {
      std::cerr << "autokernel verify: " << a.tuned << ": " << entries.status().message() << "\n";
      return 2;
    }
    tuned = *doc;
  } else {
    auto best = client.best(TuningQuery{});
    if (!best.ok()) {
      std::cerr << "autokernel verify: cannot read the farm's tuning database: " << best.status().message() << "\n";
      return 1;
    }
    tuned = tuning_export(best->entries, 0);
  }
  json targets = json::array();
  if (!a.profile.empty()) {
    auto doc = read_json("verify", a.profile, "`autokernel profile --json` output");
    if (!doc) return 2;
    targets = profile_targets(*doc);
  }
  json reports = json::array();
  const int rc = verify_with(client, a, tuned, targets, reports);
  if (Status s = write_reports(a.json_out, reports); !s.ok()) {
    std::cerr << "autokernel verify: " << s.message() << "\n";
    return 1;
  }
  if (!a.json_out.empty()) std::cerr << "verify report written to " << a.json_out << "\n";
  return rc;
}

int extract(const ExtractArgs& a) {
  const auto doc = read_json("extract", a.profile, "`autokernel profile --json` output");
  if (!doc) return 2;
  const auto profiles = profiles_in(*doc);
  if (profiles.empty()) {
    std::cerr << "autokernel extract: " << a.profile << " holds no profile with targets (a failed profile?)\n";
    return 2;
  }
  if (profiles.size() > 1)
    std::cerr << "autokernel extract: " << a.profile << " holds several profiles; extracting the first\n";
  auto p = protocol::parse_model_profile(*profiles[0]);
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
  print_extraction(x);
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

int run_model_pipeline(const ClientArgs& c, const RunArgs& a, const std::string& backend) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto seconds = [](Clock::time_point from) { return std::chrono::duration<double>(Clock::now() - from).count(); };
  CoordinatorClient client(c.endpoint, std::chrono::milliseconds(c.timeout_ms), c.curve);
  const std::string out_dir = a.out_dir.empty() ? std::string(".") : a.out_dir;

  // 1. Profile.
  std::printf("== 1/4 profile %s (%s, %s)\n", a.model.c_str(), backend.c_str(), a.dtype.c_str());
  json doc = {{"kind", "model"}, {"task", "profile"}, {"backend", backend}, {"dtype", a.dtype}};
  if (int rc = model_document("run", a.model, doc); rc != 0) return rc;
  bool complete = false;
  auto rows = run_model_campaign(client, doc, "profile", backend, "", 0, complete);
  if (!rows || rows->empty()) return 1;
  const pr::ResultRow& prow = rows->front();
  if (prow.correctness != "PASS" || !prow.model) {
    std::cerr << "autokernel run: the profile " << prow.correctness << " at " << prow.stage << ": " << prow.reason
              << "\n";
    return 1;
  }
  print_profile(*prow.model, 15);
  (void)write_reports(out_dir + "/profile.json", json::array({prow.model->raw}));
  const double profile_s = seconds(t0);

  // 2. Extract.
  std::printf("== 2/4 extract\n");
  ExtractOptions o;
  o.backend = backend;
  o.min_share = a.min_share;
  o.budget_trials = a.budget_trials;
  const Extraction x = cli::extract(*prow.model, o);
  print_extraction(x);

  // 3. Optimize: the studies.
  const auto t2 = Clock::now();
  std::printf("== 3/4 optimize\n");
  if (x.campaign.is_null()) {
    std::printf("no target kept: nothing to optimize; verifying the model as it is\n");
  } else {
    (void)write_reports(out_dir + "/model-study.json", x.campaign);
    auto sub = client.submit(x.campaign);
    if (!sub.ok()) {
      std::cerr << "autokernel run: the study campaign was rejected: " << sub.status().message() << "\n";
      return 1;
    }
    std::printf("campaign %s (%s): %zu studies\n", sub->campaign_id.c_str(), sub->name.c_str(),
                x.campaign.value("targets", json::array()).size());
    if (!wait_for_campaign(client, sub->campaign_id, stop_flag())) return 1;
    if (auto st = client.status(); st.ok())
      for (const auto& cs : st->campaigns)
        if (cs.campaign_id == sub->campaign_id && cs.is_study) std::cout << format_studies(cs);
  }
  const double optimize_s = seconds(t2);

  // 4. Verify with what the studies found.
  const auto t3 = Clock::now();
  std::printf("== 4/4 verify\n");
  auto best = client.best(TuningQuery{});
  if (!best.ok()) {
    std::cerr << "autokernel run: cannot read the tuning database: " << best.status().message() << "\n";
    return 1;
  }
  VerifyArgs v;
  v.model = a.model;
  v.backend = backend;
  v.dtype = a.dtype;
  v.compile = a.verify_compile;
  v.iters = a.verify_iters;
  v.min_speedup = a.min_speedup;
  json reports = json::array();
  // What verify plugs in is also written out (tuned.json), for `autokernel export --hf`.
  const json tuned = tuning_export(best->entries, SystemClock().wall_ms());
  if (Status s = write_file(out_dir + "/tuned.json", tuned.dump(1)); !s.ok())
    std::cerr << "autokernel run: " << s.message() << "\n";
  const int rc = verify_with(client, v, tuned, json(prow.model->targets), reports);
  (void)write_reports(out_dir + "/verify.json", reports);
  std::printf(
      "wall time: profile %.1f s, optimize %.1f s, verify %.1f s, total %.1f s; reports in %s "
      "(profile.json, model-study.json, verify.json, tuned.json)\n",
      profile_s, optimize_s, seconds(t3), seconds(t0), out_dir.c_str());
  if (backend != "cpu")
    std::printf("ship the tuned kernels: autokernel export --hf DIR --tuned %s/tuned.json --build\n", out_dir.c_str());
  return rc;
}

int export_hf(const ClientArgs& c, const ExportArgs& a) {
  const char* verb = "export";
  // What export_hf.py checks too, before minutes of compiling.
  if (a.name.size() < 2 || a.name.size() > 63 || !std::islower(static_cast<unsigned char>(a.name[0])) ||
      a.name.back() == '_' || a.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos) {
    std::cerr << "autokernel export: --name '" << a.name
              << "': a Python package name in lower case ([a-z][a-z0-9_]*[a-z0-9])\n";
    return 2;
  }
  {
    std::error_code ec;
    if (fs::exists(a.hf_dir, ec) && !fs::is_directory(a.hf_dir, ec)) {
      std::cerr << "autokernel export: " << a.hf_dir << " exists and is not a folder\n";
      return 2;
    }
    // A package written before is replaced; nothing else is (export_hf.py checks the marker's contents).
    if (fs::is_directory(a.hf_dir, ec) && !fs::is_empty(a.hf_dir, ec) &&
        !fs::exists(fs::path(a.hf_dir) / ".autokernel-export", ec)) {
      std::cerr << "autokernel export: " << a.hf_dir
                << " exists, is not empty and is not a package this command wrote; name another folder\n";
      return 2;
    }
  }
  // The tuned kernels: the file's, else the farm's whole tuning database.
  std::vector<TunedEntry> tuned;
  if (!a.tuned.empty()) {
    auto doc = read_json(verb, a.tuned, "`autokernel best --export` output");
    if (!doc) return 2;
    auto entries = parse_tuning_export(*doc);
    if (!entries.ok()) {
      std::cerr << "autokernel export: " << a.tuned << ": " << entries.status().message() << "\n";
      return 2;
    }
    tuned = std::move(*entries);
  } else {
    CoordinatorClient client(c.endpoint, std::chrono::milliseconds(c.timeout_ms), c.curve);
    auto best = client.best(TuningQuery{});
    if (!best.ok()) {
      std::cerr << "autokernel export: cannot read the farm's tuning database: " << best.status().message() << "\n";
      return 1;
    }
    tuned = std::move(best->entries);
  }
  // One GPU model's cuda and triton kernels; of two for one (type, shape, dtype), the faster.
  std::vector<std::string> models;  // each GPU model once (same_gpu_model), as first written
  for (const TunedEntry& e : tuned)
    if (e.backend != Backend::kCpu && std::none_of(models.begin(), models.end(), [&](const std::string& x) {
          return same_gpu_model(x, e.gpu_model);
        }))
      models.push_back(e.gpu_model);
  std::string gpu_model = a.gpu_model;
  if (gpu_model.empty()) {
    if (models.empty()) {
      std::cerr << "autokernel export: no cuda or triton kernel in "
                << (a.tuned.empty() ? "the farm's tuning database" : a.tuned)
                << " (a package holds GPU kernels; cpu entries cannot be exported)\n";
      return 2;
    }
    if (models.size() > 1) {
      std::sort(models.begin(), models.end());
      std::cerr << "autokernel export: kernels of " << models.size() << " GPU models; name one with --gpu-model:";
      for (const std::string& m : models) std::cerr << " \"" << m << "\"";
      std::cerr << "\n";
      return 2;
    }
    gpu_model = models.front();
  }
  // Every entry of that GPU model: the fastest of each (type, shape, dtype) that compiles is kept
  // (after compiling, below).
  json selected = json::array();
  std::set<std::string> archs;
  for (const TunedEntry& e : tuned) {
    if (e.backend == Backend::kCpu || !same_gpu_model(e.gpu_model, gpu_model)) continue;
    selected.push_back(e);
    if (!e.arch.empty()) archs.insert(e.arch);
  }
  if (selected.empty()) {
    std::cerr << "autokernel export: no cuda or triton kernel tuned on \"" << gpu_model << "\"\n";
    return 2;
  }
  std::string arch = a.arch;
  if (arch.empty()) {
    if (archs.size() != 1) {
      std::cerr << "autokernel export: the entries of \"" << gpu_model << "\" ran on "
                << (archs.empty() ? std::string("an architecture they do not name")
                                  : std::to_string(archs.size()) + " architectures")
                << "; give --arch (sm_90a)\n";
      return 2;
    }
    arch = *archs.begin();
  }

  char tmpl[] = "/tmp/autokernel-export-XXXXXX";
  if (!mkdtemp(tmpl)) {
    std::cerr << "autokernel export: cannot create a folder under /tmp: " << std::strerror(errno) << "\n";
    return 1;
  }
  const fs::path work(tmpl);
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  } cleanup{work};
  const PythonChoice python = choose_python(a.python, a.python_env, AK_DEFAULT_PYTHON);
  CompilerOptions co;
  co.cache_dir = (work / "cache").string();
  co.python = python.path;
  // The entries' sources are candidates' code (a Triton source runs as Python when compiled): they
  // compile confined as on a worker (common/confine.h), unless --unconfined.
  {
    std::error_code ec;
    std::vector<std::string> hidden = {co.cache_dir};
    if (fs::exists(a.hf_dir, ec)) hidden.push_back(fs::absolute(a.hf_dir, ec).lexically_normal().string());
    auto policy = make_confinement_policy(a.unconfined, hidden, int64_t(4) << 30);
    if (!policy.ok()) {
      std::cerr << "autokernel export: " << policy.status().message() << "\n";
      return 1;
    }
    co.confinement = *policy;
  }
  std::unique_ptr<Compiler> compiler = make_compiler(co);
  Capabilities caps;
  caps.gpu_name = gpu_model;
  caps.arch = arch;
  caps.backends = {Backend::kCuda, Backend::kTriton};
  std::fprintf(stderr, "compiling %zu tuned kernels for %s (%s)%s\n", selected.size(), gpu_model.c_str(), arch.c_str(),
               a.unconfined ? ", unconfined" : "");
  auto prepared =
      compile_tuned_kernels(*compiler, selected, Backend::kCuda, caps, a.min_speedup, (work / "kernels").string(),
                            /*tensor_maps=*/false);  // the package's launcher builds none
  if (!prepared.ok()) {
    std::cerr << "autokernel export: " << prepared.status().message() << "\n";
    return 1;
  }
  for (const json& s : prepared->skipped)
    std::cerr << "left out: " << s.value("kernel_type", "?") << " " << s.value("shape", json()).dump() << ": "
              << s.value("reason", "") << "\n";
  std::map<std::string, json> fastest;  // "type|dtype|shape" -> the compiled entry with the lowest latency
  for (const json& e : prepared->entries) {
    const std::string key = e.value("kernel_type", "") + "|" + e.value("dtype", "") + "|" + e["shape"].dump();
    auto it = fastest.find(key);
    if (it == fastest.end() || e.value("latency_us", 0.0) < it->second.value("latency_us", 0.0)) fastest[key] = e;
  }
  json kept = json::array();
  for (auto& [key, e] : fastest) kept.push_back(e);
  if (kept.empty()) {
    std::cerr << "autokernel export: no kernel left to export\n";
    return 2;
  }
  const json manifest = {{"device", "cuda"}, {"arch", arch}, {"entries", kept}};
  if (Status s = write_file((work / "plug.json").string(), manifest.dump(1)); !s.ok()) {
    std::cerr << "autokernel export: " << s.message() << "\n";
    return 1;
  }
  for (const auto& f : models::pipeline_files()) {
    const fs::path path = work / "models" / std::string(f.path);
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    if (Status s = write_file(path.string(), std::string(f.text)); !s.ok()) {
      std::cerr << "autokernel export: " << s.message() << "\n";
      return 1;
    }
  }
  std::vector<std::string> argv = {python.path,     (work / "models" / "export_hf.py").string(),
                                   "--manifest",    (work / "plug.json").string(),
                                   "--ops-library", a.ops_library.empty() ? default_ops_library() : a.ops_library,
                                   "--out",         a.hf_dir,
                                   "--name",        a.name,
                                   "--gpu-model",   gpu_model};
  if (a.build) argv.push_back("--build");
  SpawnOptions so;
  so.null_stdin = true;
  auto child = ChildProcess::spawn(argv, so);
  if (!child.ok()) {
    std::cerr << "autokernel export: cannot start " << python.path << ": " << child.status().message() << "\n";
    return 1;
  }
  const int rc = child->wait();
  if (rc == 0 && a.build)
    std::printf("built: import it with sys.path.insert(0, \"%s/build/<variant>\"); import %s  (%s/README.md)\n",
                a.hf_dir.c_str(), a.name.c_str(), a.hf_dir.c_str());
  return rc;
}

}  // namespace ak::cli
