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
// The tuning database as a table: one line per entry (target, config, latency, speedup, worker,
// date).
std::string format_best(const protocol::BestReply& export_document);
// Writes `text` to `path` whole or not at all (common/file.h: write_file_atomically).
Status write_file(const std::string& path, const std::string& text);
// Writes an export document to `path` (temporary file and rename).
Status write_tuning_export(const protocol::BestReply& export_document, const std::string& path);
// Polls STATUS and redraws a progress line (done/total, pass/fail, best, rate, ETA) until the
// campaign has no queued or leased job, `stop` is set or `deadline` passes. Returns false if it
// ended for any reason but completion (the campaign itself goes on in the farm), a campaign that
// ended because it was cancelled included.
bool wait_for_campaign(CoordinatorClient& client, const std::string& campaign_id, const std::atomic<bool>& stop,
                       std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());

}  // namespace ak::cli
