#include "coordinator/plan.h"

#include "coordinator/kernelbench_campaign.h"
#include "coordinator/model_campaign.h"
#include "coordinator/study.h"

namespace ak {

Result<PlannedCampaign> plan_job_campaign(const nlohmann::json& doc, const std::string& campaign_id, int64_t wall_ms,
                                          const PlanLimits& limits) {
  if (is_kernelbench_document(doc)) return plan_kernelbench_campaign(doc, campaign_id, wall_ms, limits);
  if (is_model_document(doc)) return plan_model_campaign(doc, campaign_id, wall_ms, limits);
  return plan_campaign(doc, campaign_id, wall_ms, limits);
}

Result<CampaignCheck> check_campaign(const nlohmann::json& doc, const PlanLimits& limits) {
  CampaignCheck c;
  if (is_study_document(doc)) {
    auto sc = parse_study_campaign(doc);
    if (!sc.ok()) return sc.status();
    c.kind = "study";
    c.name = sc->name;
    c.studies = int64_t(sc->studies.size());
    c.jobs = int64_t(sc->budget_trials) * c.studies;
    return c;
  }
  auto plan = plan_job_campaign(doc, "check", 0, limits);
  if (!plan.ok()) return plan.status();
  c.kind = is_kernelbench_document(doc) ? "kernelbench" : is_model_document(doc) ? "model" : "kernels";
  c.name = plan->record.name;
  c.jobs = int64_t(plan->jobs.size());
  return c;
}

}  // namespace ak
