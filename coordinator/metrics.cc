#include "coordinator/metrics.h"

#include "common/metric_names.h"

namespace ak {

using namespace prometheus;
namespace mn = metric_names;

CoordinatorMetrics::CoordinatorMetrics() : registry_(std::make_shared<Registry>()) {
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
  store_errors_ =
      &BuildCounter().Name(mn::kStoreErrors).Help("Failed writes or reads of the store").Register(*registry_).Add({});
  duplicates_ = &BuildCounter().Name(mn::kDuplicateResults).Help("Results received for jobs that already had one").Register(*registry_).Add({});
}

Status CoordinatorMetrics::serve(const std::string& bind_address) {
  if (bind_address.empty()) return {};
  try {
    exposer_ = std::make_unique<Exposer>(bind_address);
    exposer_->RegisterCollectable(registry_);
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

}  // namespace ak
