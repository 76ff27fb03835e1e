// Campaign files: JSON or TOML with the keys of coordinator/campaign.h. A `source_file` key (a
// path relative to the campaign file) is read here and sent inline as `source`, so the
// coordinator never reads the submitter's files.
//
// What a campaign file may name is bounded (coordinator/CAMPAIGNS.md, "source_file"): a
// `source_file` must be a relative path, without `..`, naming a regular file that lies (symbolic
// links resolved) under the campaign file's folder or the current folder, and at most the
// protocol's frame size (common/protocol.h, kMaxFrameBytes). `allow_source_outside` lifts the
// place rules (autokernel submit --allow-source-outside), not the size. A JSON file nested deeper
// than kMaxJsonDepth (common/json_limits.h) is refused before it is parsed.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace ak::cli {

Result<nlohmann::json> load_campaign_file(const std::string& path, bool allow_source_outside = false);

// The text of `source_file` as named by the campaign file `campaign_path`, under the rules above.
Result<std::string> read_source_file(const std::string& campaign_path, const std::string& source_file,
                                     bool allow_source_outside = false);

}  // namespace ak::cli
