#include "worker/coordinator_link.h"

#include <utility>

namespace ak {

CoordinatorLink::CoordinatorLink(std::string endpoint, Options options, int64_t now_ms)
    : endpoint_(std::move(endpoint)),
      options_(options),
      down_since_ms_(now_ms),
      next_warning_ms_(now_ms + options.warn_after_ms) {}

void CoordinatorLink::connected(int64_t now_ms) {
  if (up_) return;
  up_ = true;
  why_is_handshake_ = false;
  if (warned_)
    recovery_ = "connected to coordinator " + endpoint_ + " again after " +
                std::to_string((now_ms - down_since_ms_) / 1000) + " s without a connection";
  warned_ = false;
}

void CoordinatorLink::failed(int64_t now_ms, std::string why, bool handshake) {
  if (handshake || !why_is_handshake_ || up_) {
    why_ = std::move(why);
    why_is_handshake_ = handshake;
  }
  if (!up_) return;
  up_ = false;
  down_since_ms_ = now_ms;
  next_warning_ms_ = now_ms + options_.warn_after_ms;
}

std::optional<std::string> CoordinatorLink::due_warning(int64_t now_ms) {
  if (up_ || now_ms < next_warning_ms_) return std::nullopt;
  warned_ = true;
  next_warning_ms_ = now_ms + options_.repeat_ms;
  return "cannot reach coordinator " + endpoint_ + " for " + std::to_string((now_ms - down_since_ms_) / 1000) + " s (" +
         why_ +
         "); is it running and reachable from this host, and is this worker's key in its --allow-workers? "
         "Results wait in the outbox and are sent once it answers";
}

std::optional<std::string> CoordinatorLink::take_recovery() { return std::exchange(recovery_, std::nullopt); }

std::optional<int64_t> CoordinatorLink::next_warning_ms() const {
  if (up_) return std::nullopt;
  return next_warning_ms_;
}

}  // namespace ak
