// Every kind of campaign document, planned by the one function the coordinator's SUBMIT uses, and
// checked offline by `autokernel check` with the same code. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "coordinator/campaign.h"

namespace ak {

// The jobs of a kernel, KernelBench or model campaign (by its "kind"); a study document is not
// planned here (its jobs come from its studies, coordinator/study.h). Errors (kInvalidArgument)
// name the key at fault.
Result<PlannedCampaign> plan_job_campaign(const nlohmann::json& doc, const std::string& campaign_id, int64_t wall_ms,
                                          const PlanLimits& limits);

// What a document would plan, without a coordinator: its kind ("kernels", "study", "kernelbench",
// "model"), name, jobs (a study: its trial budget over all studies) and studies.
struct CampaignCheck {
  std::string kind;
  std::string name;
  int64_t jobs = 0;
  int64_t studies = 0;
};
Result<CampaignCheck> check_campaign(const nlohmann::json& doc, const PlanLimits& limits = {});

}  // namespace ak
