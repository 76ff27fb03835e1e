// Outbox: results the worker has sent but the coordinator has not acknowledged yet.
//
// Keyed by (job_id, attempt). Every result goes in here before it is sent as RESULT and leaves
// only on ACK; until then due() hands it back for resending, after resend_ms and then with the
// interval doubling up to max_resend_ms (a coordinator that is down is not flooded). With a path,
// every add and ack is appended to a JSON-lines file first, so a worker process that is killed and
// restarted with the same state directory resends what was never acknowledged ("nothing lost").
// The file is compacted on open() and whenever acknowledged lines outnumber live ones.
//
// File format, one JSON document per line:
//   {"op":"add","result":{...ResultRecord...}}
//   {"op":"ack","job_id":"...","attempt":N}
// A torn last line (the process died mid-write) is skipped on load.
//
// Times are the caller's monotonic milliseconds (Clock::now_ms()); the outbox reads no clock.
// Thread-safe (one mutex), though the agent uses it from its main thread only.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/job.h"
#include "common/status.h"

namespace ak {

struct OutboxOptions {
  int64_t resend_ms = 2'000;       // first resend this long after a send [ms]
  int64_t max_resend_ms = 30'000;  // cap of the doubling interval [ms]
  std::string path;                // JSON-lines file; empty keeps the outbox in memory only
  bool fsync_each = false;         // fsync after each append (survives power loss, not only kill)
};

class Outbox {
 public:
  explicit Outbox(OutboxOptions options);
  ~Outbox();
  Outbox(const Outbox&) = delete;
  Outbox& operator=(const Outbox&) = delete;

  // Loads the file (when a path is set; a missing file is an empty outbox), compacts it and keeps
  // it open for appending. Loaded entries are due at once (now_ms). Fails with kUnavailable if the
  // file cannot be read or written. Without a path it only succeeds.
  Status open(int64_t now_ms);

  // Records a result that is being sent now; due for resend at now_ms + resend_ms. A second add
  // of the same key replaces the entry. If persisting fails the entry is still kept in memory and
  // the error is returned (the caller logs it; the result is still sent).
  Status add(const ResultRecord& result, int64_t now_ms);
  // Removes the entry; false if there was none (a duplicate or late ACK).
  bool ack(const std::string& job_id, int attempt);

  // Entries whose resend time has come, oldest first; each is rescheduled with its interval
  // doubled (capped at max_resend_ms). The caller sends them.
  std::vector<ResultRecord> due(int64_t now_ms);
  // Every entry, oldest first.
  std::vector<ResultRecord> all() const;
  // Resets every entry's backoff as if it had just been sent at now_ms (after the caller resent
  // all() because the coordinator had forgotten this worker).
  void restart_backoff(int64_t now_ms);

  bool contains(const std::string& job_id, int attempt) const;
  size_t size() const;
  // Earliest resend time, empty when the outbox is empty.
  std::optional<int64_t> next_due_ms() const;

 private:
  struct Entry {
    ResultRecord result;
    int64_t seq = 0;        // insertion order
    int64_t due_ms = 0;
    int64_t interval_ms = 0;
  };
  using Key = std::pair<std::string, int>;
  Status append_locked(const std::string& line);
  Status compact_locked();
  std::vector<ResultRecord> ordered_locked(const std::vector<const Entry*>& entries) const;

  OutboxOptions options_;
  mutable std::mutex mu_;
  std::map<Key, Entry> entries_;
  int64_t next_seq_ = 0;
  int fd_ = -1;              // append fd of options_.path
  int64_t dead_lines_ = 0;   // lines in the file that no longer describe a live entry
};

}  // namespace ak
