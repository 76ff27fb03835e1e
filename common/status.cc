#include "common/status.h"

namespace ak {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kNotFound: return "NOT_FOUND";
    case StatusCode::kAlreadyExists: return "ALREADY_EXISTS";
    case StatusCode::kUnavailable: return "UNAVAILABLE";
    case StatusCode::kTimedOut: return "TIMED_OUT";
    case StatusCode::kInternal: return "INTERNAL";
  }
  return "UNKNOWN";
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  return std::string(status_code_name(code_)) + ": " + message_;
}

}  // namespace ak
