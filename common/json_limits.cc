#include "common/json_limits.h"

#include <cstdint>
#include <string>

namespace ak {

Status check_json_depth(std::string_view text, size_t max_depth) {
  return check_json_limits(text, max_depth, SIZE_MAX);
}

Status check_json_limits(std::string_view text, size_t max_depth, size_t max_values) {
  size_t depth = 0;
  size_t commas = 0;
  bool in_string = false;
  bool escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > max_depth)
          return Status::invalid("JSON nested deeper than " + std::to_string(max_depth) + " levels (at byte " +
                                 std::to_string(i) + ")");
        break;
      case ',':
        if (++commas > max_values)
          return Status::invalid("JSON holds more than " + std::to_string(max_values) + " values (at byte " +
                                 std::to_string(i) + ")");
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return {};
}

}  // namespace ak
