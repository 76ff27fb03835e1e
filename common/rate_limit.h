// Per-peer budgets: a token bucket for requests and a throttle for log lines, so that no peer can
// make the coordinator spend unbounded time serving it or flood its log (issue 19). Limits and the
// refusals they cause are documented in common/PROTOCOL.md, "Limits".
//
// Both take the time as an argument (monotonic milliseconds, Clock::now_ms()) and do no I/O.
// Both remember at most `max_keys` peers: when full, the entries idle longest are dropped (a
// dropped bucket comes back full, a dropped throttle entry logs at once), so an attacker who
// varies its identity costs bounded memory. Not thread-safe: one thread owns each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

namespace ak {

struct TokenBucketOptions {
  double rate_per_s = 100;  // tokens added per second (sustained requests per second)
  double burst = 200;       // bucket size: requests that may arrive at once after a quiet spell
  size_t max_keys = 4096;
};

class PeerRateLimiter {
 public:
  explicit PeerRateLimiter(TokenBucketOptions options = {}) : options_(options) {}
  // Takes one token from `peer`'s bucket: true when there was one (serve the request), false
  // when the peer is over its rate (refuse it).
  bool allow(const std::string& peer, int64_t now_ms);
  const TokenBucketOptions& options() const { return options_; }
  size_t peers() const { return buckets_.size(); }

 private:
  struct Bucket {
    double tokens = 0;
    int64_t last_ms = 0;
  };
  void evict(int64_t now_ms);
  TokenBucketOptions options_;
  std::unordered_map<std::string, Bucket> buckets_;
};

// Lets one line per key through per interval and counts the rest.
class LogThrottle {
 public:
  explicit LogThrottle(int64_t interval_ms = 10'000, size_t max_keys = 4096)
      : interval_ms_(interval_ms), max_keys_(max_keys) {}
  // nullopt: stay quiet (the event is counted). Otherwise log now: the value is how many events
  // of this key were suppressed since its last logged line (0 for the first).
  std::optional<int64_t> admit(const std::string& key, int64_t now_ms);

 private:
  struct Entry {
    int64_t logged_ms = 0;
    int64_t suppressed = 0;
  };
  int64_t interval_ms_;
  size_t max_keys_;
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace ak
