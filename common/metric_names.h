// Prometheus series of the coordinator, one table (names follow Prometheus conventions: one
// prefix, base units, `_total` on counters, no job or worker ids in labels). Dashboards in
// dashboards/ and the rules there refer to these names.
#pragma once

namespace ak::metric_names {

inline constexpr const char* kJobs = "autokernel_jobs";                          // gauge{state}
inline constexpr const char* kQueueDepth = "autokernel_queue_depth";             // gauge
inline constexpr const char* kJobsInFlight = "autokernel_jobs_in_flight";        // gauge
inline constexpr const char* kJobsDispatched = "autokernel_jobs_dispatched_total";  // counter
inline constexpr const char* kJobsCompleted = "autokernel_jobs_completed_total";    // counter{status}
inline constexpr const char* kJobsRequeued = "autokernel_jobs_requeued_total";      // counter
inline constexpr const char* kJobDuration = "autokernel_job_duration_seconds";      // histogram
inline constexpr const char* kWorkersConnected = "autokernel_workers_connected";    // gauge
inline constexpr const char* kHeartbeatsMissed = "autokernel_heartbeats_missed_total";  // counter
inline constexpr const char* kProtocolErrors = "autokernel_protocol_errors_total";  // counter{kind}
inline constexpr const char* kStoreErrors = "autokernel_store_errors_total";        // counter
inline constexpr const char* kDuplicateResults = "autokernel_duplicate_results_total";  // counter
inline constexpr const char* kPeerRefusals = "autokernel_peer_refusals_total";          // counter{reason}

}  // namespace ak::metric_names
