#include "common/hash.h"

#include <xxhash.h>

#include <cstdio>

namespace ak {

uint64_t xxh64(std::string_view data, uint64_t seed) {
  return static_cast<uint64_t>(XXH64(data.data(), data.size(), seed));
}

std::string xxh64_hex(std::string_view data) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(xxh64(data)));
  return buf;
}

}  // namespace ak
