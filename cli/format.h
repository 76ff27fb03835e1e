// Human-readable output of the CLI: status tables, result tables, the progress line, exports.
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "common/protocol.h"
#include "common/status.h"
#include "coordinator/client.h"

namespace ak::cli {

// The STATUS reply: job counts, results per hour and per status, one line per worker (with its
// calibration) and one per campaign (with its studies' table).
std::string format_status(const protocol::StatusReply& status);
// One warning line per need of StatusReply::unrunnable ("warning: 12 queued jobs need backend cuda;
// no connected worker offers it"); empty when every queued job fits a connected worker.
std::string format_unrunnable(const protocol::StatusReply& status);
// The per-study table of a study campaign's STATUS entry (trials, best, plateau, stop, ETA).
std::string format_studies(const protocol::CampaignRow& campaign);
// Rows sorted by campaign, then shape/dtype, best speedup first; at most `limit` rows (0 = all).
std::string format_results(const std::vector<protocol::ResultRow>& rows, int limit);
// The rows in the table's order (per campaign, kernel, shape by its numbers and dtype, the best
// speedup first), the first `limit` of them when limit > 0: what `results` prints, as a table or
// as JSON.
std::vector<protocol::ResultRow> ordered_results(std::vector<protocol::ResultRow> rows, int limit);
// Writes results.tsv (header + one line per row) and, if json_path is not empty, a JSON array.
// Written to a temporary file and renamed, so a reader never sees half a file.
Status write_exports(const std::vector<protocol::ResultRow>& rows, const std::string& tsv_path,
                     const std::string& json_path);
// Adds `rows` to the log that results.tsv and results.json keep across runs (autokernel run): the
// rows whose job_id a file already holds are left out of it (a campaign resumed by a later run, a
// row exported before), the others are appended in the order of their experiment number, the TSV
// header written only when the TSV is new. The experiment number goes on from the files: rows of a
// data dir whose numbers do not (another --data-dir, the same --out) are renumbered after the
// file's last. Each file is rewritten atomically (write_file), so a reader sees it before or
// after. Fails, changing nothing, when the TSV's header is not this version's (another tool's file,
// or an older column set: move it away) or results.json is not a JSON array. On success returns
// how many rows were new to the TSV.
Result<size_t> append_exports(std::vector<protocol::ResultRow> rows, const std::string& tsv_path,
                              const std::string& json_path);
// The tuning database as a table: one line per entry (target, config, latency, speedup, worker,
// date).
std::string format_best(const protocol::BestReply& export_document);
// Writes `text` to `path` whole or not at all (common/file.h: write_file_atomically).
Status write_file(const std::string& path, const std::string& text);
// Writes an export document to `path` (temporary file and rename).
Status write_tuning_export(const protocol::BestReply& export_document, const std::string& path);
// The progress line of one campaign as STATUS shows it, `elapsed_s` after the wait began: for a
// kernels campaign "[done/total] pass, not-pass, best, jobs/s, ETA"; for a study campaign (whose
// job count grows as trials are proposed) "[studies done/all] trials, pass, not-pass, best, ETA",
// its ETA the longest of the running studies' own estimates.
std::string progress_line(const protocol::CampaignRow& campaign, double elapsed_s);
// When a progress line is printed: on a terminal whenever asked (it is redrawn in place); into a
// pipe or file when progress moved, at most once every `min_interval_s`, and always when the
// campaign is complete, so that a log of a campaign of thousands of jobs has a line every few
// seconds, not a line a job.
class ProgressThrottle {
 public:
  ProgressThrottle(bool tty, double min_interval_s) : tty_(tty), min_interval_s_(min_interval_s) {}
  bool should_print(int64_t progress, bool complete, double now_s);

 private:
  bool tty_;
  double min_interval_s_;
  int64_t last_progress_ = -1;
  double last_s_ = -1e300;
};
// The lines that end `submit --wait`: how the campaign ended (jobs finished, pass, not pass,
// cancelled; its best row) and the commands to run next, naming the campaign and the client
// endpoint (`client_flag`, e.g. " --client tcp://host:5556", or empty for the default).
std::string campaign_summary(const protocol::CampaignRow& campaign, const std::string& client_flag);
// Polls STATUS and redraws a progress line (progress_line above; ProgressThrottle) until the
// campaign has no queued or leased job, `stop` is set or `deadline` passes. Returns false if it
// ended for any reason but completion (the campaign itself goes on in the farm), a campaign that
// ended because it was cancelled included. `own_workers` > 0 says the farm is a private one with
// that many workers (`autokernel run`): once that many are connected, this campaign's queued jobs
// that none of them can run (CampaignRow::unrunnable) would wait forever, so the wait cancels the
// campaign, names what the jobs need and what the workers offer on stderr, and returns false.
bool wait_for_campaign(CoordinatorClient& client, const std::string& campaign_id, const std::atomic<bool>& stop,
                       std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max(),
                       int own_workers = 0);

}  // namespace ak::cli
