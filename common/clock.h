// Clock: the only source of time for leases, heartbeats, backoff and deadlines.
//
// Everything that reasons about time takes a Clock& (or a `now_ms` argument) so that tests
// advance a FakeClock instead of sleeping. Times are milliseconds on a monotonic axis; wall time
// (for records people read) comes from wall_ms(). Both implementations are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace ak {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic milliseconds; only differences are meaningful.
  virtual int64_t now_ms() const = 0;
  // Milliseconds since the Unix epoch, for timestamps stored in records.
  virtual int64_t wall_ms() const = 0;
};

class SystemClock final : public Clock {
 public:
  int64_t now_ms() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  int64_t wall_ms() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

// A clock that moves only when a test calls advance(); starts at `start_ms` on both axes.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t start_ms = 1'000'000) : now_(start_ms) {}
  int64_t now_ms() const override { return now_.load(); }
  int64_t wall_ms() const override { return now_.load(); }
  void advance(std::chrono::milliseconds d) { now_ += d.count(); }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace ak
