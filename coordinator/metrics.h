// CoordinatorMetrics: the coordinator's Prometheus series (names in common/metric_names.h),
// served on /metrics by prometheus-cpp's Exposer.
//
// Thread-safe (prometheus-cpp metrics are atomic). Gauges are refreshed from the scheduler's
// counts by the Coordinator (coordinator/coordinator.h) after each batch of events. Without a bind address, metrics are
// kept but not served (tests, or --metrics "").
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "common/job.h"
#include "common/protocol.h"
#include "common/status.h"

namespace ak {

class CoordinatorMetrics {
 public:
  CoordinatorMetrics();
  // Starts serving on `bind_address` ("127.0.0.1:0" picks a free port; read it with port()).
  Status serve(const std::string& bind_address);
  int port() const;  // 0 when not serving

  void set_jobs(int64_t queued, int64_t leased, int64_t done, int64_t lost);
  void set_workers(int64_t n);
  void dispatched();
  void requeued();
  void completed(ResultStatus status, double duration_s);
  void heartbeats_missed(int64_t total);
  void protocol_error(protocol::ErrorCode code);
  void store_error();
  void duplicate_result();
  // A peer refused (issue 19): "unknown_key" (handshake), "not_leased", "stale_attempt",
  // "key_mismatch", "worker_id_in_use" (issue 21), "not_owner", "not_admin".
  void refused(const std::string& reason);
  // autokernel_build_info{version} = 1, set once at start.
  void set_build_info(const std::string& version);
  // Queued jobs no connected worker can run (Scheduler::stranded().by_need, summed over what they need).
  void set_unrunnable(int64_t n);
  // Per-campaign progress and best speedups from a STATUS snapshot (FarmCore::status), replacing
  // the previous one: autokernel_campaign_jobs{campaign,state} for the `max_campaigns` most
  // recently submitted campaigns, and autokernel_best_speedup{campaign,target,gpu_model} for their
  // study targets (a campaign without studies is one target named after the campaign). Campaigns
  // beyond the newest `max_campaigns` drop out, so the series stay bounded.
  void set_campaigns(const std::vector<protocol::CampaignRow>& campaigns, size_t max_campaigns = 50);

  prometheus::Registry& registry() { return *registry_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  prometheus::Family<prometheus::Gauge>* jobs_;
  prometheus::Gauge* queued_;
  prometheus::Gauge* leased_;
  prometheus::Gauge* done_;
  prometheus::Gauge* lost_;
  prometheus::Gauge* queue_depth_;
  prometheus::Gauge* in_flight_;
  prometheus::Gauge* workers_;
  prometheus::Counter* dispatched_;
  prometheus::Counter* requeued_;
  prometheus::Family<prometheus::Counter>* completed_;
  prometheus::Histogram* duration_;
  prometheus::Counter* heartbeats_missed_;
  double heartbeats_missed_seen_ = 0;
  prometheus::Family<prometheus::Counter>* protocol_errors_;
  prometheus::Counter* store_errors_;
  prometheus::Counter* duplicates_;
  prometheus::Family<prometheus::Counter>* refusals_;
  prometheus::Family<prometheus::Gauge>* build_info_;
  prometheus::Gauge* unrunnable_;
  class Snapshot;  // a collectable serving the latest set_campaigns families
  std::shared_ptr<Snapshot> campaigns_;
};

}  // namespace ak
