// Limits checked on JSON text before it is parsed (issue 19: "inputs from peers are bounded before
// they are parsed"). Documented in common/PROTOCOL.md, "Limits".
//
// nlohmann::json parses nesting with an explicit stack, but a document nested 100,000 deep costs
// milliseconds to parse and to destroy, and code that walks it recursively (dump, copies,
// from_json) can overflow the C++ stack. check_json_depth scans the text once, without recursion
// and without allocating, and refuses it before anything is built. Pure and thread-safe.
#pragma once

#include <cstddef>
#include <string_view>

#include "common/status.h"

namespace ak {

// Deepest nesting of arrays and objects a peer, a campaign file or a reply may carry. Campaigns,
// results and replies nest at most 6 deep; 64 leaves room for KernelBench metadata.
inline constexpr size_t kMaxJsonDepth = 64;

// ok when no array or object in `text` is nested deeper than `max_depth` (a scalar is depth 0,
// `[]` depth 1). Brackets inside strings do not count; escapes are honoured. Says nothing about
// whether the text is valid JSON (the parser does that): on a refusal, kInvalidArgument
// "JSON nested deeper than <max_depth> levels (at byte <offset>)". O(text.size()).
Status check_json_depth(std::string_view text, size_t max_depth = kMaxJsonDepth);

// Most values (array elements and object members) one frame from a peer may hold. Parsing costs
// per value far more than per byte: 4 MiB of "1," is two million values, 30 ms to parse and
// 50 MB while parsed. Campaigns and results hold a few thousand.
inline constexpr size_t kMaxJsonValues = 100'000;

// check_json_depth, and also at most `max_values` commas outside strings (each array element or
// object member after the first of its container is one): kInvalidArgument "JSON holds more than
// <max_values> values". O(text.size()).
Status check_json_limits(std::string_view text, size_t max_depth = kMaxJsonDepth, size_t max_values = kMaxJsonValues);

}  // namespace ak
