// The one table of result fields: names and units of result rows, TSV columns and JSON export
// keys. Prometheus series names live in common/metric_names.h.
//
// The first ten TSV columns are AutoKernel's results.tsv columns, in its order, so its tools read
// our exports; the farm's own columns follow. `correctness` holds the ResultStatus name (PASS,
// FAIL, COMPILE_ERROR, TIMEOUT, CRASH, REJECTED, LOST, CANCELLED). Figures of a job that did not pass are
// empty in TSV and null in JSON: a failed candidate is never timed.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/job.h"

namespace ak {

struct ResultColumn {
  const char* name;
  const char* unit;  // "" when unitless
  const char* description;
};

// In TSV order.
const std::vector<ResultColumn>& result_columns();

// One row keyed by column names; `experiment` is the 1-based order of completion.
nlohmann::json result_row(const JobRecord& job, const ResultRecord& result, int64_t experiment);

std::string tsv_header();
std::string tsv_line(const nlohmann::json& row);

}  // namespace ak
