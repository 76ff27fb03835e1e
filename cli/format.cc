#include "cli/format.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "common/file.h"
#include "common/result_fields.h"

namespace ak::cli {

using nlohmann::json;

namespace {
std::string fmt_double(const json& v, const char* f = "%.2f") {
  if (!v.is_number()) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v.get<double>());
  return buf;
}
std::string fmt_duration(double s) {
  char buf[64];
  if (s < 0 || s > 1e7) return "?";
  if (s < 60) std::snprintf(buf, sizeof buf, "%.0fs", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%dm%02ds", int(s) / 60, int(s) % 60);
  else std::snprintf(buf, sizeof buf, "%dh%02dm", int(s) / 3600, (int(s) % 3600) / 60);
  return buf;
}
// ": <reason>" of a cancelled campaign's status entry, or nothing when none was given.
std::string reason_suffix(const json& campaign) {
  const std::string r = campaign.value("cancel_reason", "");
  return r.empty() ? "" : ": " + r;
}
}  // namespace

std::string format_status(const json& st) {
  std::ostringstream os;
  const auto& j = st["jobs"];
  os << "jobs: " << j["queued"] << " queued, " << j["leased"] << " leased, " << j["done"] << " done, " << j["lost"]
     << " lost";
  os << "   results/hour: " << fmt_double(st["results_per_hour"], "%.0f") << "\n";
  if (!st["results"].empty()) {
    os << "results:";
    for (const auto& [k, v] : st["results"].items()) os << " " << k << "=" << v;
    os << "\n";
  }
  os << "workers (" << st["workers"].size() << "):\n";
  for (const auto& w : st["workers"]) {
    char line[512];
    std::snprintf(line, sizeof line, "  %-32s %-20s %-8s slots=%d leased=%zu seen %lldms ago\n",
                  w["worker_id"].get<std::string>().c_str(), w["gpu"].get<std::string>().c_str(),
                  w["arch"].get<std::string>().c_str(), w["slots"].get<int>(), w["leased"].size(),
                  static_cast<long long>(w["last_seen_ms_ago"].get<int64_t>()));
    os << line;
    // The worker's calibration, as announced in READY.
    const json c = w.value("ceilings", json::object());
    if (c.value("copy_bandwidth_gbps", 0.0) > 0) {
      std::string gemm;
      const json rates = c.value("gemm_tflops", json::object());  // named: items() must not outlive it
      for (const auto& [dtype, tf] : rates.items())
        gemm += " " + dtype + " " + std::to_string(int(tf.get<double>() + 0.5));
      std::snprintf(line, sizeof line, "    copy %.0f GB/s%s%s; datasheet %s\n", c["copy_bandwidth_gbps"].get<double>(),
                    gemm.empty() ? "" : ", GEMM TFLOP/s", gemm.c_str(),
                    c.value("datasheet_name", "").empty() ? "none" : c.value("datasheet_name", "").c_str());
      os << line;
    }
  }
  os << "campaigns (" << st["campaigns"].size() << "):\n";
  for (const auto& c : st["campaigns"]) {
    os << "  " << c["campaign_id"].get<std::string>() << " " << c["name"].get<std::string>() << ": "
       << c["finished"] << "/" << c["total"] << " finished, " << c["pass"] << " pass, " << c["failed"] << " not pass";
    if (!c["best"].is_null())
      os << ", best " << fmt_double(c["best"]["speedup"]) << "x (" << c["best"]["shape"].get<std::string>() << " "
         << c["best"]["dtype"].get<std::string>() << " " << c["best"]["config"].get<std::string>() << ")";
    if (c.value("cancelled", false)) {
      os << "; CANCELLED (" << c.value("cancelled_jobs", 0) << " jobs" << reason_suffix(c) << ")";
    }
    os << "\n";
    if (c.contains("studies")) os << format_studies(c);
  }
  return os.str();
}

std::string format_studies(const json& c) {
  std::ostringstream os;
  char line[512];
  const json amdahl = c.value("amdahl", json::object());  // named: items() must not outlive it
  for (const auto& [model, e] : amdahl.items()) {
    std::snprintf(line, sizeof line, "    end-to-end estimate on %s: %.3fx (Amdahl, speedups over PyTorch)\n", model.c_str(),
                  e.get<double>());
    os << line;
  }
  std::snprintf(line, sizeof line, "    %-3s %-44s %6s %6s %5s %11s %11s %8s %6s %-10s %8s\n", "id", "target", "share",
                "trials", "fly", "torch_us", "best_us", "speedup", "stale", "stop", "ETA");
  os << line;
  for (const auto& s : c["studies"]) {
    const json& b = s["best"];
    std::snprintf(line, sizeof line, "    %-3d %-44s %6.3f %6lld %5lld %11s %11s %8s %6lld %-10s %8s\n", s["study"].get<int>(),
                  s["target"].get<std::string>().substr(0, 44).c_str(), s["share"].get<double>(),
                  (long long)s["trials"].get<int64_t>(), (long long)s["in_flight"].get<int64_t>(),
                  fmt_double(s["baseline_us"]).c_str(), b.is_null() ? "-" : fmt_double(b["latency_us"]).c_str(),
                  b.is_null() ? "-" : fmt_double(b["speedup"], "%.3f").c_str(),
                  (long long)s["since_improvement"].get<int64_t>(), s["stop"].get<std::string>().c_str(),
                  s["done"].get<bool>() ? "-" : fmt_duration(s["eta_s"].get<double>()).c_str());
    os << line;
    if (!b.is_null()) os << "        best " << b["config"].get<std::string>() << "\n";
  }
  return os.str();
}

std::string format_results(const json& rows_in, int limit) {
  std::vector<json> rows(rows_in.begin(), rows_in.end());
  std::stable_sort(rows.begin(), rows.end(), [](const json& a, const json& b) {
    auto key = [](const json& r) { return r["campaign_id"].get<std::string>() + " " + r["shape"].get<std::string>() + " " + r["dtype"].get<std::string>(); };
    if (key(a) != key(b)) return key(a) < key(b);
    double sa = a["speedup_vs_pytorch"].is_number() ? a["speedup_vs_pytorch"].get<double>() : -1;
    double sb = b["speedup_vs_pytorch"].is_number() ? b["speedup_vs_pytorch"].get<double>() : -1;
    return sa > sb;
  });
  std::ostringstream os;
  char line[1024];
  std::snprintf(line, sizeof line, "%-13s %-5s %-11s %-6s %-28s %-13s %11s %11s %8s %8s %7s  %s\n", "correctness",
                "att", "shape", "dtype", "config", "gpu", "latency_us", "torch_us", "speedup", "GB/s", "%peak", "job");
  os << line;
  int n = 0;
  for (const auto& r : rows) {
    if (limit > 0 && n++ >= limit) break;
    std::snprintf(line, sizeof line, "%-13s %-5d %-11s %-6s %-28s %-13s %11s %11s %8s %8s %7s  %s\n",
                  r["correctness"].get<std::string>().c_str(), r["attempt"].get<int>(),
                  r["shape"].get<std::string>().c_str(), r["dtype"].get<std::string>().c_str(),
                  r["config"].get<std::string>().substr(0, 28).c_str(), r["gpu"].get<std::string>().substr(0, 13).c_str(),
                  fmt_double(r["latency_us"]).c_str(), fmt_double(r["baseline_us"]).c_str(),
                  fmt_double(r["speedup_vs_pytorch"], "%.3f").c_str(), fmt_double(r["bandwidth_gbps"], "%.1f").c_str(),
                  fmt_double(r["pct_peak"], "%.1f").c_str(), r["job_id"].get<std::string>().c_str());
    os << line;
    if (r["correctness"] != "PASS" && !r["reason"].get<std::string>().empty())
      os << "    " << r["stage"].get<std::string>() << ": " << r["reason"].get<std::string>().substr(0, 200) << "\n";
  }
  return os.str();
}

Status write_file(const std::string& path, const std::string& text) { return write_file_atomically(path, text); }

Status write_tuning_export(const json& doc, const std::string& path) {
  return write_file(path, doc.dump(1, ' ', false, json::error_handler_t::replace) + "\n");
}

std::string format_best(const json& doc) {
  const auto& entries = doc.value("entries", json::array());
  if (entries.empty()) return "the tuning database has no entry that matches\n";
  std::string out = fmt::format("{:<18} {:<7} {:<22} {:<5} {:<18} {:>11} {:>8}  {:<34} {}\n", "kernel", "backend",
                                "gpu model", "dtype", "shape", "latency_us", "speedup", "config", "job / date");
  for (const auto& e : entries) {
    std::string shape;
    for (const auto& d : e["shape"]) shape += (shape.empty() ? "" : "x") + std::to_string(d.get<int64_t>());
    std::string config;
    for (const auto& [k, v] : e["config"].items()) config += (config.empty() ? "" : ",") + k + "=" + v.dump();
    const json p = e.value("provenance", json::object());
    out += fmt::format("{:<18} {:<7} {:<22} {:<5} {:<18} {:>11.2f} {:>7.2f}x  {:<34} {} {}\n",
                       e.value("kernel_type", ""), e.value("backend", ""), e.value("gpu_model", ""),
                       e.value("dtype", ""), shape, e.value("latency_us", 0.0), e.value("speedup", 0.0),
                       config.empty() ? "-" : config, p.value("job_id", ""), p.value("date", ""));
  }
  return out;
}

Status write_exports(const json& rows, const std::string& tsv_path, const std::string& json_path) {
  std::string tsv = tsv_header() + "\n";
  for (const auto& r : rows) tsv += tsv_line(r) + "\n";
  if (Status s = write_file(tsv_path, tsv); !s.ok()) return s;
  if (!json_path.empty()) {
    if (Status s = write_file(json_path, rows.dump(1) + "\n"); !s.ok()) return s;
  }
  return {};
}

bool wait_for_campaign(CoordinatorClient& client, const std::string& campaign_id, const std::atomic<bool>& stop,
                       std::chrono::steady_clock::time_point deadline) {
  const bool tty = isatty(STDOUT_FILENO);
  const auto start = std::chrono::steady_clock::now();
  int64_t last_printed = -1;
  int failures = 0;
  int64_t version = -1;
  while (!stop.load() && std::chrono::steady_clock::now() < deadline) {
    // A long poll: answered when something changed, or after 500 ms to redraw the rate and ETA.
    auto st = version < 0 ? client.status() : client.status_after(version, std::chrono::milliseconds(500));
    if (!st.ok()) {
      if (++failures > 10) {
        std::cerr << "\nlost the coordinator: " << st.status().message() << "\n";
        return false;
      }
      continue;  // the client already waited out its timeout
    }
    failures = 0;
    version = st->value("version", int64_t{-1});
    for (const auto& c : (*st)["campaigns"]) {
      if (c["campaign_id"] != campaign_id) continue;
      const int64_t total = c["total"], fin = c["finished"], pass = c["pass"], failed = c["failed"];
      const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double rate = fin / std::max(el, 1e-3);
      const double eta = rate > 0 ? (total - fin) / rate : -1;
      std::string best = c["best"].is_null() ? "-" : fmt_double(c["best"]["speedup"], "%.3f") + "x " +
                                                           c["best"]["shape"].get<std::string>() + " " +
                                                           c["best"]["dtype"].get<std::string>() + " " +
                                                           c["best"]["config"].get<std::string>();
      char line[512];
      std::snprintf(line, sizeof line, "[%lld/%lld] pass %lld  not-pass %lld  best %s  %.1f jobs/s  ETA %s",
                    (long long)fin, (long long)total, (long long)pass, (long long)failed, best.c_str(), rate,
                    fmt_duration(eta).c_str());
      if (tty) {
        std::cout << "\r" << line << "\x1b[K" << std::flush;
      } else if (fin != last_printed) {
        // Without a terminal, a line each time progress moved.
        std::cout << line << "\n" << std::flush;
      }
      last_printed = fin;
      if (c.value("complete", fin >= total)) {
        if (tty) std::cout << "\n";
        if (c.value("cancelled", false)) {
          std::cout << "campaign " << campaign_id << " was cancelled" << reason_suffix(c) << "\n";
          return false;
        }
        return true;
      }
    }
  }
  if (tty) std::cout << "\n";  // end the progress line before what follows
  return false;
}

}  // namespace ak::cli
