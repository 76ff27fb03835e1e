// Identifiers. Campaign ids are unique across coordinator restarts (time + randomness); job ids
// are "<campaign_id>-<index>" so that a job's campaign is visible in logs and exports.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>

namespace ak {

inline std::string new_campaign_id() {
  std::random_device rd;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch()).count();
  char buf[48];
  std::snprintf(buf, sizeof buf, "c%llx%04x", static_cast<unsigned long long>(ms), rd() & 0xffffu);
  return buf;
}

inline std::string job_id_for(const std::string& campaign_id, int64_t index) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%06lld", static_cast<long long>(index));
  return campaign_id + "-" + buf;
}

}  // namespace ak
