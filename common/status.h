// Status and Result<T>: the error type of every function that can fail for an expected reason.
//
// A Status is either ok() or carries a code and a message that says what was expected, what
// arrived and what to do. Result<T> holds a value or a non-ok Status (see below). Both are cheap
// to copy and safe to pass between threads (they own their strings). Callers write
//   if (!s.ok()) return s;
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace ak {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // caller passed something malformed; retrying the same input fails again
  kNotFound,
  kAlreadyExists,
  kUnavailable,       // a dependency (Redis, a socket, the GPU) is not reachable; may be retried
  kTimedOut,          // outcome unknown: the operation may or may not have happened
  kInternal,
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return {}; }
  static Status invalid(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status timed_out(std::string m) { return {StatusCode::kTimedOut, std::move(m)}; }
  static Status internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: message", or "OK".
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Result<T>: a value, or the error that took its place. ok() == status().ok() always: a Result
// holding a value has an OK status. An OK Status carries no value, so a Result built from one is
// an error (INTERNAL, saying so) rather than an "ok" Result with nothing in it; return a value, or
// a Status that is not ok. value(), -> and * require ok().
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status)                          // NOLINT(google-explicit-constructor)
      : status_(status.ok() ? Status::internal("a Result was built from an OK Status, which carries no value; "
                                               "return the value, or a Status that is not ok")
                            : std::move(status)) {}

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;  // OK exactly when value_ holds a value
};

}  // namespace ak
