#include "coordinator/metrics.h"

#include <algorithm>
#include <mutex>

#include <prometheus/collectable.h>

#include "common/metric_names.h"

namespace ak {

using namespace prometheus;
namespace mn = metric_names;

// The families of the latest set_campaigns call, replaced whole, so that a campaign that drops out
// leaves no stale series behind (a Family would keep every label set it ever saw).
class CoordinatorMetrics::Snapshot : public Collectable {
 public:
  std::vector<MetricFamily> Collect() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return families_;
  }
  void set(std::vector<MetricFamily> f) {
    std::lock_guard<std::mutex> lock(mu_);
    families_ = std::move(f);
  }

 private:
  mutable std::mutex mu_;
  std::vector<MetricFamily> families_;
};

CoordinatorMetrics::CoordinatorMetrics()
    : registry_(std::make_shared<Registry>()), campaigns_(std::make_shared<Snapshot>()) {
  jobs_ = &BuildGauge().Name(mn::kJobs).Help("Jobs by lifecycle state").Register(*registry_);
  queued_ = &jobs_->Add({{"state", "queued"}});
  leased_ = &jobs_->Add({{"state", "leased"}});
  done_ = &jobs_->Add({{"state", "done"}});
  lost_ = &jobs_->Add({{"state", "lost"}});
  queue_depth_ = &BuildGauge().Name(mn::kQueueDepth).Help("Jobs waiting for a worker").Register(*registry_).Add({});
  in_flight_ = &BuildGauge().Name(mn::kJobsInFlight).Help("Jobs leased to workers").Register(*registry_).Add({});
  workers_ = &BuildGauge().Name(mn::kWorkersConnected).Help("Workers registered and heartbeating").Register(*registry_).Add({});
  dispatched_ = &BuildCounter().Name(mn::kJobsDispatched).Help("Job deliveries sent to workers").Register(*registry_).Add({});
  requeued_ = &BuildCounter().Name(mn::kJobsRequeued).Help("Jobs put back in the queue after a lease ended without a result").Register(*registry_).Add({});
  completed_ = &BuildCounter().Name(mn::kJobsCompleted).Help("Jobs finished, by result status").Register(*registry_);
  for (int s = 0; s <= static_cast<int>(ResultStatus::kCancelled); ++s)
    completed_->Add({{"status", result_status_name(static_cast<ResultStatus>(s))}});
  duration_ = &BuildHistogram().Name(mn::kJobDuration).Help("Time from first delivery of a job to its stored result").Register(*registry_)
                   .Add({}, Histogram::BucketBoundaries{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300});
  heartbeats_missed_ = &BuildCounter().Name(mn::kHeartbeatsMissed).Help("Workers forgotten after missing heartbeats").Register(*registry_).Add({});
  protocol_errors_ = &BuildCounter().Name(mn::kProtocolErrors).Help("Bad frames and requests, by kind").Register(*registry_);
  store_errors_ = &BuildCounter().Name(mn::kStoreErrors).Help("Failed writes or reads of the store").Register(*registry_).Add({});
  refusals_ = &BuildCounter()
                   .Name(mn::kPeerRefusals)
                   .Help(
                       "Peers and requests refused: unknown key, a result not leased to its worker, a cancel or import "
                       "the client may not make; by reason")
                   .Register(*registry_);
  // Every kind and reason exists from the start at 0, so that dashboards and alerts see a series
  // (and a rate of 0) on a healthy farm instead of no data.
  for (int k = 0; k <= static_cast<int>(protocol::kLastErrorCode); ++k)
    protocol_errors_->Add({{"kind", protocol::error_code_name(static_cast<protocol::ErrorCode>(k))}});
  for (const char* reason :
       {"unknown_key", "not_leased", "stale_attempt", "key_mismatch", "worker_id_in_use", "not_owner", "not_admin"})
    refusals_->Add({{"reason", reason}});
  build_info_ = &BuildGauge()
                     .Name(mn::kBuildInfo)
                     .Help("Always 1; the labels say which build of autokernel serves these metrics")
                     .Register(*registry_);
  unrunnable_ = &BuildGauge()
                     .Name(mn::kJobsUnrunnable)
                     .Help("Queued jobs that no connected worker can run (backend, GPU model or arch nobody offers)")
                     .Register(*registry_)
                     .Add({});
  duplicates_ = &BuildCounter().Name(mn::kDuplicateResults).Help("Results received for jobs that already had one").Register(*registry_).Add({});
}

void CoordinatorMetrics::set_build_info(const std::string& version) { build_info_->Add({{"version", version}}).Set(1); }

void CoordinatorMetrics::set_unrunnable(int64_t n) { unrunnable_->Set(static_cast<double>(n)); }

void CoordinatorMetrics::set_campaigns(const std::vector<protocol::CampaignRow>& campaigns, size_t max_campaigns) {
  std::vector<const protocol::CampaignRow*> newest;
  for (const auto& c : campaigns) newest.push_back(&c);
  std::sort(newest.begin(), newest.end(), [](const auto* a, const auto* b) {
    return a->submitted_wall_ms != b->submitted_wall_ms ? a->submitted_wall_ms > b->submitted_wall_ms
                                                        : a->campaign_id < b->campaign_id;
  });
  if (newest.size() > max_campaigns) newest.resize(max_campaigns);
  MetricFamily jobs{
      mn::kCampaignJobs, "Jobs of a campaign: total, finished (done or lost), passed, failed", MetricType::Gauge, {}};
  MetricFamily best{
      mn::kBestSpeedup, "Best speedup over PyTorch among a target's passing results", MetricType::Gauge, {}};
  auto gauge = [](std::vector<ClientMetric::Label> labels, double v) {
    ClientMetric m;
    m.label = std::move(labels);
    m.gauge.value = v;
    return m;
  };
  for (const auto* c : newest) {
    const std::pair<const char*, int64_t> states[] = {
        {"total", c->total}, {"finished", c->finished}, {"passed", c->pass}, {"failed", c->failed}};
    for (const auto& [state, n] : states)
      jobs.metric.push_back(gauge({{"campaign", c->campaign_id}, {"state", state}}, static_cast<double>(n)));
    if (c->studies.empty()) {
      if (c->best && c->best->speedup > 0)
        best.metric.push_back(
            gauge({{"campaign", c->campaign_id}, {"gpu_model", ""}, {"target", c->name}}, c->best->speedup));
    }
    for (const auto& st : c->studies)
      if (st.best && st.best->speedup > 0)
        best.metric.push_back(gauge({{"campaign", c->campaign_id}, {"gpu_model", st.gpu_model}, {"target", st.target}},
                                    st.best->speedup));
  }
  campaigns_->set({std::move(jobs), std::move(best)});
}

Status CoordinatorMetrics::serve(const std::string& bind_address) {
  if (bind_address.empty()) return {};
  try {
    exposer_ = std::make_unique<Exposer>(bind_address);
    exposer_->RegisterCollectable(registry_);
    exposer_->RegisterCollectable(campaigns_);
  } catch (const std::exception& e) {
    return Status::unavailable("cannot serve /metrics on " + bind_address + ": " + e.what() + "; pick another --metrics address");
  }
  return {};
}

int CoordinatorMetrics::port() const {
  if (!exposer_) return 0;
  auto ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

void CoordinatorMetrics::set_jobs(int64_t queued, int64_t leased, int64_t done, int64_t lost) {
  queued_->Set(static_cast<double>(queued));
  leased_->Set(static_cast<double>(leased));
  done_->Set(static_cast<double>(done));
  lost_->Set(static_cast<double>(lost));
  queue_depth_->Set(static_cast<double>(queued));
  in_flight_->Set(static_cast<double>(leased));
}
void CoordinatorMetrics::set_workers(int64_t n) { workers_->Set(static_cast<double>(n)); }
void CoordinatorMetrics::dispatched() { dispatched_->Increment(); }
void CoordinatorMetrics::requeued() { requeued_->Increment(); }
void CoordinatorMetrics::completed(ResultStatus status, double duration_s) {
  completed_->Add({{"status", result_status_name(status)}}).Increment();
  if (duration_s >= 0) duration_->Observe(duration_s);
}
void CoordinatorMetrics::heartbeats_missed(int64_t total) {
  const double t = static_cast<double>(total);
  if (t > heartbeats_missed_seen_) heartbeats_missed_->Increment(t - heartbeats_missed_seen_);
  heartbeats_missed_seen_ = t;
}
void CoordinatorMetrics::protocol_error(protocol::ErrorCode code) {
  protocol_errors_->Add({{"kind", protocol::error_code_name(code)}}).Increment();
}
void CoordinatorMetrics::store_error() { store_errors_->Increment(); }
void CoordinatorMetrics::duplicate_result() { duplicates_->Increment(); }
void CoordinatorMetrics::refused(const std::string& reason) { refusals_->Add({{"reason", reason}}).Increment(); }

}  // namespace ak
