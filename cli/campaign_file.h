// Campaign files: JSON or TOML with the keys of coordinator/campaign.h. A `source_file` key (a
// path relative to the campaign file) is read here and sent inline as `source`, so the
// coordinator never reads the submitter's files.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace ak::cli {

Result<nlohmann::json> load_campaign_file(const std::string& path);

}  // namespace ak::cli
