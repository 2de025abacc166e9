#pragma once
// Status and StatusOr<T>: the error values every gpusched library returns for expected
// failures (bad input, unknown ids, conflicts). Exceptions never cross a library boundary.
//
// Thread-safety: value types; a const Status may be read from any thread.

#include <cassert>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace gpusched {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // the caller's input is wrong; the message names the field and value
  kNotFound,          // an id that does not exist
  kAlreadyExists,     // a duplicate id or name
  kFailedPrecondition,// the request is valid but the current state forbids it
  kResourceExhausted, // no capacity could ever satisfy it (infeasible)
  kUnavailable,       // a peer or service is not reachable; retrying may help
  kInternal,          // a broken invariant or an unexpected third-party failure
  kDataLoss,          // stored state is corrupt
  kNotStored,         // a change could not be made durable; nothing acted on it (safe to retry)
  kUnauthenticated,   // no credentials, or credentials the server does not accept
  kPermissionDenied,  // the caller is known but may not do this
};

// Returns the lower-case name of `code`, e.g. "invalid_argument".
const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid_argument: gpu_mem: must be >= 0, got -5"
  std::string ToString() const;

  bool operator==(const Status& other) const = default;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status ResourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status NotStored(std::string m) { return {StatusCode::kNotStored, std::move(m)}; }
inline Status Unauthenticated(std::string m) {
  return {StatusCode::kUnauthenticated, std::move(m)};
}
inline Status PermissionDenied(std::string m) {
  return {StatusCode::kPermissionDenied, std::move(m)};
}

// Holds either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT(implicit)
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT(implicit)
    if (status_.ok()) status_ = Internal("StatusOr constructed from an OK status without value");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  // REQUIRES: ok().
  const T& value() const& { Require(); return *value_; }
  T& value() & { Require(); return *value_; }
  T&& value() && { Require(); return std::move(*value_); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  void Require() const {
    if (!value_) {
      std::cerr << "StatusOr::value() on error: " << status_.ToString() << "\n";
      std::abort();
    }
  }
  Status status_;
  std::optional<T> value_;
};

}  // namespace gpusched

// Returns early from the enclosing function when `expr` yields a non-OK Status.
#define GS_RETURN_IF_ERROR(expr)                    \
  do {                                              \
    ::gpusched::Status gs_status_ = (expr);         \
    if (!gs_status_.ok()) return gs_status_;        \
  } while (0)

#define GS_CONCAT_INNER(a, b) a##b
#define GS_CONCAT(a, b) GS_CONCAT_INNER(a, b)
// Declares `lhs` from a StatusOr expression, returning its Status on error.
#define GS_ASSIGN_OR_RETURN(lhs, expr) \
  GS_ASSIGN_OR_RETURN_IMPL(GS_CONCAT(gs_statusor_, __LINE__), lhs, expr)
#define GS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
