// The content hash of the farm: xxh64 (seed 0 unless given), as a number or as 16 lower-case hex
// digits. Results carry it as source_hash / options_hash, the compile cache names its artefacts by
// it and the KernelBench bridge keys problems by it; all are persisted (Redis, cache folders), so
// the algorithm, seed and text form never change. Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ak {

uint64_t xxh64(std::string_view data, uint64_t seed = 0);
// xxh64(data) as "%016x": 16 lower-case hex digits, leading zeros kept.
std::string xxh64_hex(std::string_view data);

}  // namespace ak
