#include "cli/format.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "common/file.h"
#include "common/result_fields.h"

namespace ak::cli {

using nlohmann::json;

namespace pr = protocol;

namespace {
std::string fmt_double(double v, const char* f = "%.2f") {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}
std::string fmt_double(const std::optional<double>& v, const char* f = "%.2f") { return v ? fmt_double(*v, f) : "-"; }
// %peak of a results row; "(cache)" marks a cache-resident one, which a memory-bound row has no
// percentage for (common/job.h, Measurement::cache_resident).
std::string pct_cell(const pr::ResultRow& r) {
  if (!r.cache_resident.value_or(false)) return fmt_double(r.pct_peak, "%.1f");
  return r.pct_peak ? fmt_double(*r.pct_peak, "%.1f") + " (cache)" : "(cache)";
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
std::string reason_suffix(const pr::CampaignRow& campaign) {
  return campaign.cancel_reason.empty() ? "" : ": " + campaign.cancel_reason;
}
}  // namespace

std::string format_unrunnable(const pr::StatusReply& st) {
  std::ostringstream os;
  for (const auto& [need, n] : st.unrunnable)
    os << "warning: " << n << " queued job" << (n == 1 ? "" : "s") << " need" << (n == 1 ? "s " : " ") << need
       << "; no connected worker offers it" << (st.workers.empty() ? " (no worker is connected)" : "")
       << "; they wait until one that does connects\n";
  return os.str();
}

std::string format_status(const pr::StatusReply& st) {
  std::ostringstream os;
  const auto& j = st.jobs;
  os << "jobs: " << j.queued << " queued, " << j.leased << " leased, " << j.done << " done, " << j.lost << " lost";
  os << "   results/hour: " << fmt_double(st.results_per_hour, "%.0f") << "\n";
  os << format_unrunnable(st);
  if (!st.results.empty()) {
    os << "results:";
    for (const auto& [k, v] : st.results) os << " " << k << "=" << v;
    os << "\n";
  }
  os << "workers (" << st.workers.size() << "):\n";
  for (const auto& w : st.workers) {
    char line[512];
    std::snprintf(line, sizeof line, "  %-32s %-20s %-8s slots=%d leased=%zu seen %lldms ago\n", w.worker_id.c_str(),
                  w.gpu.c_str(), w.arch.c_str(), w.slots, w.leased.size(), static_cast<long long>(w.last_seen_ms_ago));
    os << line;
    // The worker's calibration, as announced in READY.
    const Ceilings& c = w.ceilings;
    if (c.copy_bandwidth_gbps > 0) {
      std::string gemm;
      for (const auto& [dtype, tf] : c.gemm_tflops) gemm += " " + dtype + " " + std::to_string(int(tf + 0.5));
      std::snprintf(line, sizeof line, "    copy %.0f GB/s%s%s; datasheet %s\n", c.copy_bandwidth_gbps,
                    gemm.empty() ? "" : ", GEMM TFLOP/s", gemm.c_str(),
                    c.datasheet_name.empty() ? "none" : c.datasheet_name.c_str());
      os << line;
    }
  }
  os << "campaigns (" << st.campaigns.size() << "):\n";
  for (const auto& c : st.campaigns) {
    os << "  " << c.campaign_id << " " << c.name << ": " << c.finished << "/" << c.total << " finished, " << c.pass
       << " pass, " << c.failed << " not pass";
    if (c.best)
      os << ", best " << fmt_double(c.best->speedup) << "x (" << c.best->shape << " " << c.best->dtype << " "
         << c.best->config << ")";
    if (c.cancelled) {
      os << "; CANCELLED (" << c.cancelled_jobs << " jobs" << reason_suffix(c) << ")";
    }
    os << "\n";
    if (c.is_study) os << format_studies(c);
  }
  return os.str();
}

std::string format_studies(const pr::CampaignRow& c) {
  std::ostringstream os;
  char line[512];
  for (const auto& [model, e] : c.amdahl) {
    std::snprintf(line, sizeof line, "    end-to-end estimate on %s: %.3fx (Amdahl, speedups over PyTorch)\n",
                  model.c_str(), e);
    os << line;
  }
  std::snprintf(line, sizeof line, "    %-3s %-44s %6s %6s %5s %11s %11s %8s %6s %-10s %8s\n", "id", "target", "share",
                "trials", "fly", "torch_us", "best_us", "speedup", "stale", "stop", "ETA");
  os << line;
  for (const auto& s : c.studies) {
    const auto& b = s.best;
    std::snprintf(line, sizeof line, "    %-3d %-44s %6.3f %6lld %5lld %11s %11s %8s %6lld %-10s %8s\n", s.study,
                  s.target.substr(0, 44).c_str(), s.share, (long long)s.trials, (long long)s.in_flight,
                  fmt_double(s.baseline_us).c_str(), !b ? "-" : fmt_double(b->latency_us).c_str(),
                  !b ? "-" : fmt_double(b->speedup, "%.3f").c_str(), (long long)s.since_improvement, s.stop.c_str(),
                  s.done ? "-" : fmt_duration(s.eta_s).c_str());
    os << line;
    if (b) os << "        best " << b->config << "\n";
  }
  return os.str();
}

namespace {

// "64x1024" -> {64, 1024}: shapes order by their numbers, not their text.
std::vector<int64_t> shape_numbers(const std::string& s) {
  std::vector<int64_t> out;
  int64_t v = 0;
  bool in = false;
  for (char c : s) {
    if (c >= '0' && c <= '9') {
      v = v * 10 + (c - '0');
      in = true;
    } else if (in) {
      out.push_back(v);
      v = 0;
      in = false;
    }
  }
  if (in) out.push_back(v);
  return out;
}

}  // namespace

std::vector<pr::ResultRow> ordered_results(std::vector<pr::ResultRow> rows, int limit) {
  // Per campaign, kernel, shape (by its numbers) and dtype, best first.
  std::stable_sort(rows.begin(), rows.end(), [](const pr::ResultRow& a, const pr::ResultRow& b) {
    auto key = [](const pr::ResultRow& r) {
      return std::make_tuple(r.campaign_id, r.kernel_type, shape_numbers(r.shape), r.dtype);
    };
    if (key(a) != key(b)) return key(a) < key(b);
    return a.speedup_vs_pytorch.value_or(-1) > b.speedup_vs_pytorch.value_or(-1);
  });
  if (limit > 0 && rows.size() > size_t(limit)) rows.resize(size_t(limit));
  return rows;
}

std::string format_results(const std::vector<pr::ResultRow>& rows_in, int limit) {
  const std::vector<pr::ResultRow> sorted = ordered_results(rows_in, limit);
  std::vector<const pr::ResultRow*> rows;
  for (const auto& r : sorted) rows.push_back(&r);
  // Every column as wide as its widest cell, so no config or name is cut.
  const std::vector<std::string> head = {"correctness", "att",        "kernel",   "tag",     "shape", "dtype", "config",
                                         "gpu",         "latency_us", "torch_us", "speedup", "GB/s",  "%peak", "job"};
  std::vector<std::vector<std::string>> cells;
  size_t cached = 0;
  for (const auto* rp : rows) {
    const pr::ResultRow& r = *rp;
    cells.push_back({r.correctness, std::to_string(r.attempt), r.kernel_type, r.tag.empty() ? "-" : r.tag,
                     r.shape.empty() ? "-" : r.shape, r.dtype, r.config.empty() ? "-" : r.config, r.gpu,
                     fmt_double(r.latency_us), fmt_double(r.baseline_us), fmt_double(r.speedup_vs_pytorch, "%.3f"),
                     fmt_double(r.bandwidth_gbps, "%.1f"), pct_cell(r), r.job_id});
    cached += r.cache_resident.value_or(false);
  }
  std::vector<size_t> width(head.size());
  for (size_t c = 0; c < head.size(); ++c) {
    width[c] = head[c].size();
    for (const auto& row : cells) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& v) {
    std::string out;
    for (size_t c = 0; c < v.size(); ++c) {
      const bool number = c >= 8 && c <= 12;  // right-aligned figures
      const bool last = c + 1 == v.size();
      out += number ? fmt::format("{:>{}}", v[c], width[c]) : last ? v[c] : fmt::format("{:<{}}", v[c], width[c]);
      if (!last) out += "  ";
    }
    return out + "\n";
  };
  std::string os = line(head);
  for (size_t i = 0; i < rows.size(); ++i) {
    os += line(cells[i]);
    const pr::ResultRow& r = *rows[i];
    if (r.correctness != "PASS" && !r.reason.empty()) os += "    " + r.stage + ": " + r.reason.substr(0, 200) + "\n";
  }
  if (cached > 0)
    os += fmt::format(
        "(cache): {} of {} rows were timed with their working set in the last-level cache; a memory-bound one "
        "has no %peak, since the only bandwidth measured is DRAM's (docs/RESULTS.md)\n",
        cached, rows.size());
  return os;
}

Status write_file(const std::string& path, const std::string& text) { return write_file_atomically(path, text); }

Status write_tuning_export(const pr::BestReply& doc, const std::string& path) {
  return write_file(path, json(doc).dump(1, ' ', false, json::error_handler_t::replace) + "\n");
}

std::string format_best(const pr::BestReply& doc) {
  if (doc.entries.empty()) return "the tuning database has no entry that matches\n";
  std::string out = fmt::format("{:<18} {:<7} {:<22} {:<5} {:<18} {:>11} {:>8}  {:<34} {}\n", "kernel", "backend",
                                "gpu model", "dtype", "shape", "latency_us", "speedup", "config", "job / date");
  size_t slower = 0;
  for (const auto& e : doc.entries) {
    const std::string config = config_string(e.config);
    const bool loses = e.m.speedup > 0 && e.m.speedup < 1;
    slower += loses;
    out += fmt::format("{:<18} {:<7} {:<22} {:<5} {:<18} {:>11.2f} {:>7.2f}{} {:<34} {} {}\n", e.kernel_type,
                       backend_name(e.backend), e.gpu_model, dtype_name(e.dtype), shape_string(e.shape), e.m.latency_us,
                       e.m.speedup, loses ? "x*" : "x ", config.empty() ? "-" : config, e.job_id, e.date);
  }
  if (slower > 0)
    out += fmt::format(
        "* {} of {} entries are slower than PyTorch's op: the best the search found, not a win; "
        "autokernel verify leaves them out (--min-speedup)\n",
        slower, doc.entries.size());
  return out;
}

Status write_exports(const std::vector<pr::ResultRow>& rows, const std::string& tsv_path,
                     const std::string& json_path) {
  const json all = rows;
  std::string tsv = tsv_header() + "\n";
  for (const auto& r : all) tsv += tsv_line(r) + "\n";
  if (Status s = write_file(tsv_path, tsv); !s.ok()) return s;
  if (!json_path.empty()) {
    if (Status s = write_file(json_path, all.dump(1) + "\n"); !s.ok()) return s;
  }
  return {};
}

Result<size_t> append_exports(std::vector<pr::ResultRow> rows, const std::string& tsv_path,
                              const std::string& json_path) {
  const std::string header = tsv_header();
  // What the TSV holds: its text, the job ids of its rows and the last experiment number.
  std::string tsv_text;
  std::set<std::string> in_tsv, in_json;
  int64_t last_experiment = 0;
  if (auto existing = read_file(tsv_path); existing.ok() && !existing->empty()) {
    tsv_text = *existing;
    const std::string first = tsv_text.substr(0, tsv_text.find('\n'));
    if (first != header) {
      // Name the first column that differs, so the user sees whether it is ours at all.
      std::istringstream have(first), want(header);
      std::string h, w;
      int column = 1;
      while (std::getline(want, w, '\t')) {
        if (!std::getline(have, h, '\t')) h = "(none)";
        if (h != w) break;
        ++column;
      }
      return Status::invalid(
          tsv_path + " has a header this autokernel does not write (column " + std::to_string(column) + " is '" + h +
          "', expected '" + w +
          "'); results.tsv is a log this version appends to: move the file away or give another --out");
    }
    if (tsv_text.back() != '\n') tsv_text += '\n';
    size_t job_col = 0;
    for (const auto& c : result_columns()) {
      if (std::string(c.name) == "job_id") break;
      ++job_col;
    }
    std::istringstream in(tsv_text);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::vector<std::string> cells;
      std::istringstream cs(line);
      for (std::string c; std::getline(cs, c, '\t');) cells.push_back(c);
      if (cells.size() > job_col) in_tsv.insert(cells[job_col]);
      if (!cells.empty())
        last_experiment = std::max<int64_t>(last_experiment, std::strtoll(cells[0].c_str(), nullptr, 10));
    }
  } else {
    tsv_text = header + "\n";
  }
  json all = json::array();
  if (!json_path.empty()) {
    if (auto existing = read_file(json_path); existing.ok() && !existing->empty()) {
      all = json::parse(*existing, nullptr, /*allow_exceptions=*/false);
      if (!all.is_array())
        return Status::invalid(json_path +
                               " is not a JSON array of result rows; it is a log this version appends to: "
                               "move the file away or give another --out");
      for (const auto& r : all) {
        if (r.is_object() && r.contains("job_id") && r["job_id"].is_string())
          in_json.insert(r["job_id"].get<std::string>());
        if (r.is_object() && r.contains("experiment") && r["experiment"].is_number_integer())
          last_experiment = std::max(last_experiment, r["experiment"].get<int64_t>());
      }
    }
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const pr::ResultRow& a, const pr::ResultRow& b) { return a.experiment < b.experiment; });
  // Numbers of another data dir (they start again at 1) go on after the file's.
  int64_t shift = 0;
  for (const auto& r : rows)
    if (!in_tsv.count(r.job_id) && !in_json.count(r.job_id)) {
      if (r.experiment <= last_experiment) shift = last_experiment - r.experiment + 1;
      break;
    }
  size_t added = 0;
  std::set<std::string> seen;
  for (auto& r : rows) {
    if (!seen.insert(r.job_id).second) continue;
    if (!in_tsv.count(r.job_id) && !in_json.count(r.job_id)) r.experiment += shift;
    const json row = r;
    if (!in_tsv.count(r.job_id)) {
      tsv_text += tsv_line(row) + "\n";
      ++added;
    }
    if (!in_json.count(r.job_id)) all.push_back(row);
  }
  if (Status s = write_file(tsv_path, tsv_text); !s.ok()) return s;
  if (!json_path.empty())
    if (Status s = write_file(json_path, all.dump(1) + "\n"); !s.ok()) return s;
  return added;
}

std::string progress_line(const pr::CampaignRow& c, double elapsed_s) {
  const std::string best =
      !c.best ? "-"
              : fmt_double(c.best->speedup, "%.3f") + "x " + c.best->shape + " " + c.best->dtype + " " + c.best->config;
  char line[768];
  if (c.is_study) {
    size_t done = 0;
    double eta = 0;
    for (const auto& s : c.studies) {
      if (s.done) {
        ++done;
      } else {
        eta = (s.eta_s < 0 || eta < 0) ? -1 : std::max(eta, s.eta_s);
      }
    }
    if (done == c.studies.size()) eta = 0;
    std::snprintf(line, sizeof line, "[studies %zu/%zu] trials %lld  pass %lld  not-pass %lld  best %s  ETA %s", done,
                  c.studies.size(), (long long)c.finished, (long long)c.pass, (long long)c.failed, best.c_str(),
                  fmt_duration(eta).c_str());
    return line;
  }
  const double rate = c.finished / std::max(elapsed_s, 1e-3);
  const double eta = rate > 0 ? (c.total - c.finished) / rate : -1;
  std::snprintf(line, sizeof line, "[%lld/%lld] pass %lld  not-pass %lld  best %s  %.1f jobs/s  ETA %s",
                (long long)c.finished, (long long)c.total, (long long)c.pass, (long long)c.failed, best.c_str(), rate,
                fmt_duration(eta).c_str());
  return line;
}

std::string campaign_summary(const pr::CampaignRow& c, const std::string& client_flag) {
  std::ostringstream o;
  o << "campaign " << c.campaign_id << " (" << c.name << ") "
    << (c.cancelled  ? "was cancelled" + reason_suffix(c)
        : c.complete ? std::string("is done")
                     : "is still running")
    << ": " << c.finished << " of " << c.total << (c.is_study ? " trials" : " jobs") << " finished, " << c.pass
    << " PASS, " << c.failed << " not PASS";
  if (c.cancelled) o << ", " << c.cancelled_jobs << " cancelled";
  o << "\n";
  if (c.best)
    o << "best: " << fmt_double(c.best->speedup, "%.3f") << "x over PyTorch at " << c.best->shape << " "
      << c.best->dtype << " " << c.best->config << "\n";
  else
    o << "no job has passed" << (c.finished > 0 ? "; the reasons are in the rows" : "") << "\n";
  o << "next: autokernel results" << client_flag << " --campaign " << c.campaign_id << "    (rows, best first)\n"
    << "      autokernel export" << client_flag << " --campaign " << c.campaign_id
    << "     (results.tsv and results.json)\n";
  if (c.pass > 0) o << "      autokernel best" << client_flag << "    (the tuning database)\n";
  if (!c.complete) o << "      autokernel status" << client_flag << "    (the campaign goes on in the farm)\n";
  return o.str();
}

bool ProgressThrottle::should_print(int64_t progress, bool complete, double now_s) {
  if (tty_) return true;
  const bool moved = progress != last_progress_;
  if (!(complete && moved) && !(moved && now_s - last_s_ >= min_interval_s_)) return false;
  last_progress_ = progress;
  last_s_ = now_s;
  return true;
}

bool wait_for_campaign(CoordinatorClient& client, const std::string& campaign_id, const std::atomic<bool>& stop,
                       std::chrono::steady_clock::time_point deadline, int own_workers) {
  const bool tty = isatty(STDOUT_FILENO);
  // Into a pipe: a line every 2 s at most while progress moves.
  ProgressThrottle throttle(tty, 2.0);
  const auto start = std::chrono::steady_clock::now();
  int failures = 0;
  int64_t version = -1;
  std::string last_warning;
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
    version = st->version;
    // Jobs nobody can run would make this wait forever without a word: say so each time it changes.
    // Not while no worker has connected yet in the first seconds (`run` starts its workers beside
    // the campaign; they connect within a second or two).
    const bool starting = st->workers.empty() && std::chrono::steady_clock::now() - start < std::chrono::seconds(5);
    // A private farm whose workers have all connected: nobody else will come for this campaign's
    // jobs that none of them can run (CampaignRow::unrunnable; another campaign's are its own).
    const protocol::CampaignRow* mine = nullptr;
    for (const auto& c : st->campaigns)
      if (c.campaign_id == campaign_id) mine = &c;
    if (own_workers > 0 && mine != nullptr && mine->unrunnable > 0 &&
        st->workers.size() >= static_cast<size_t>(own_workers)) {
      std::ostringstream needs;
      for (const auto& [need, n] : st->unrunnable) needs << (needs.tellp() > 0 ? ", " : "") << need;
      std::ostringstream offer;
      for (const auto& w : st->workers)
        offer << (offer.tellp() > 0 ? ", " : "") << w.worker_id << " (" << (w.gpu.empty() ? "cpu" : w.gpu)
              << (w.arch.empty() ? "" : " " + w.arch) << ")";
      const int64_t n = mine->unrunnable;
      const std::string reason = std::to_string(n) + " queued job" + (n == 1 ? " needs " : "s need ") + needs.str() +
                                 ", and no worker of this run offers it";
      std::cerr << (tty ? "\n" : "") << "autokernel run: " << reason << " (its workers: " << offer.str()
                << "); cancelling campaign " << campaign_id
                << ": change the campaign's [requires] or --backend, or run it where such a worker is\n";
      if (auto r = client.cancel(campaign_id, reason); !r.ok())
        std::cerr << "autokernel run: could not cancel " << campaign_id << ": " << r.status().message() << "\n";
      return false;
    }
    if (std::string w = format_unrunnable(*st); !starting && w != last_warning) {
      if (!w.empty()) std::cerr << (tty ? "\n" : "") << w << std::flush;
      last_warning = std::move(w);
    }
    if (mine != nullptr) {
      const protocol::CampaignRow& c = *mine;
      const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (throttle.should_print(c.finished, c.complete, el)) {
        const std::string line = progress_line(c, el);
        if (tty)
          std::cout << "\r" << line << "\x1b[K" << std::flush;
        else
          std::cout << line << "\n" << std::flush;
      }
      if (c.complete) {
        if (tty) std::cout << "\n";
        if (c.cancelled) {
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
