// Prometheus series of the coordinator and of the worker daemons, one table (names follow Prometheus conventions: one
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
inline constexpr const char* kBuildInfo = "autokernel_build_info";                      // gauge{version}, 1
inline constexpr const char* kJobsUnrunnable = "autokernel_jobs_unrunnable";            // gauge
// Per campaign (the newest 50, CoordinatorMetrics::set_campaigns): gauge{campaign,state} with state
// total|finished|passed|failed, and gauge{campaign,target,gpu_model}.
inline constexpr const char* kCampaignJobs = "autokernel_campaign_jobs";
inline constexpr const char* kBestSpeedup = "autokernel_best_speedup";

// Worker daemons (worker/metrics.h), each on its own /metrics. `device` is the CUDA ordinal ("0")
// or "cpu"; the autokernel_gpu_* series also carry `gpu_model`, and exist only where NVML answers.
inline constexpr const char* kWorkerJobsFinished = "autokernel_worker_jobs_finished_total";  // counter{device,status}
inline constexpr const char* kWorkerJobsHeld = "autokernel_worker_jobs_held";                // gauge{device}
inline constexpr const char* kWorkerCompileQueue = "autokernel_worker_compile_queue_depth";  // gauge{device}
inline constexpr const char* kWorkerSandboxRestarts = "autokernel_worker_sandbox_restarts_total";  // counter{device}
inline constexpr const char* kWorkerCacheHits = "autokernel_worker_compile_cache_hits_total";      // counter{device}
inline constexpr const char* kWorkerCacheMisses = "autokernel_worker_compile_cache_misses_total";  // counter{device}
inline constexpr const char* kGpuBusy = "autokernel_gpu_busy_ratio";                               // gauge 0..1
inline constexpr const char* kGpuSmClock = "autokernel_gpu_sm_clock_hertz";                        // gauge
inline constexpr const char* kGpuMemClock = "autokernel_gpu_memory_clock_hertz";                   // gauge
inline constexpr const char* kGpuPower = "autokernel_gpu_power_watts";                             // gauge
inline constexpr const char* kGpuTemperature = "autokernel_gpu_temperature_celsius";               // gauge
// 1 while the clock-event reason is active, else 0 (worker/nvml.h names the reasons).
inline constexpr const char* kGpuThrottle = "autokernel_gpu_throttle_reason";  // gauge{device,gpu_model,reason}

}  // namespace ak::metric_names
