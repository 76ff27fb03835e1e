#include "common/rate_limit.h"

#include <algorithm>
#include <vector>

namespace ak {

namespace {
// Drops the half of `m` idle longest; `last` reads an entry's last-use time.
template <typename Map, typename Last>
void drop_oldest_half(Map& m, Last last) {
  std::vector<int64_t> times;
  times.reserve(m.size());
  for (const auto& [k, v] : m) times.push_back(last(v));
  auto mid = times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2);
  std::nth_element(times.begin(), mid, times.end());
  const int64_t cut = *mid;
  for (auto it = m.begin(); it != m.end();) it = last(it->second) < cut ? m.erase(it) : std::next(it);
  // Ties at the cut: drop arbitrary ones until half is gone.
  for (auto it = m.begin(); it != m.end() && m.size() > times.size() / 2;)
    it = last(it->second) == cut ? m.erase(it) : std::next(it);
}
}  // namespace

void PeerRateLimiter::evict(int64_t) {
  drop_oldest_half(buckets_, [](const Bucket& b) { return b.last_ms; });
}

bool PeerRateLimiter::allow(const std::string& peer, int64_t now_ms) {
  auto it = buckets_.find(peer);
  if (it == buckets_.end()) {
    if (buckets_.size() >= std::max<size_t>(options_.max_keys, 2)) evict(now_ms);
    it = buckets_.emplace(peer, Bucket{options_.burst, now_ms}).first;
  }
  Bucket& b = it->second;
  const double elapsed_s = static_cast<double>(std::max<int64_t>(0, now_ms - b.last_ms)) / 1000.0;
  b.tokens = std::min(options_.burst, b.tokens + elapsed_s * options_.rate_per_s);
  b.last_ms = now_ms;
  if (b.tokens < 1.0) return false;
  b.tokens -= 1.0;
  return true;
}

std::optional<int64_t> LogThrottle::admit(const std::string& key, int64_t now_ms) {
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (entries_.size() >= std::max<size_t>(max_keys_, 2))
      drop_oldest_half(entries_, [](const Entry& e) { return e.logged_ms; });
    entries_.emplace(key, Entry{now_ms, 0});
    return int64_t{0};
  }
  Entry& e = it->second;
  if (now_ms - e.logged_ms < interval_ms_) {
    ++e.suppressed;
    return std::nullopt;
  }
  const int64_t suppressed = e.suppressed;
  e = Entry{now_ms, 0};
  return suppressed;
}

}  // namespace ak
