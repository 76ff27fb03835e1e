// WorkerStats: what a worker daemon counts for its /metrics (worker/metrics.h), one per agent.
//
// Plain atomics, so that the agent's main thread, the compile threads and the sandbox's executor
// thread update them without locks and without knowing about Prometheus; WorkerMetrics reads them
// when Prometheus scrapes. Shared (std::shared_ptr) between the agent's parts and the metrics,
// which may outlive each other. Every field may be read and written from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "common/job.h"

namespace ak {

struct WorkerStats {
  // Results this worker finished, by status (indexed by ResultStatus, kPass .. kCancelled).
  std::array<std::atomic<int64_t>, static_cast<size_t>(ResultStatus::kCancelled) + 1> finished{};
  std::atomic<int64_t> jobs_held{0};             // jobs leased here and not yet finished (gauge)
  std::atomic<int64_t> compile_queue{0};         // jobs waiting for a compile thread (gauge)
  std::atomic<int64_t> sandbox_restarts{0};      // sandboxes started after the first
  std::atomic<int64_t> compile_cache_hits{0};    // compiles answered from the compile cache
  std::atomic<int64_t> compile_cache_misses{0};  // compiles that ran a compiler

  void finish(ResultStatus s) {
    const auto i = static_cast<size_t>(s);
    if (i < finished.size()) finished[i].fetch_add(1, std::memory_order_relaxed);
  }
};

}  // namespace ak
