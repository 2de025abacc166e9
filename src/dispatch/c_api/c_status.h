#pragma once
// How the C ABI reports errors: a Status becomes its int code plus a thread-local message read
// by gpusched_last_error(), and no exception ever crosses the ABI. Shared by every *_c_api.cc.

#include <exception>
#include <string>

#include "base/status.h"

namespace gpusched::capi {

// Records `s` as this thread's last error and returns its code (0 and "" for ok).
int Report(const Status& s);
// Records `message` as this thread's last error and returns `code` (a GPUSCHED_E_* code that
// has no StatusCode, such as GPUSCHED_E_CANCELLED).
int ReportCode(int code, const std::string& message);
// This thread's last error message.
const char* LastError();

inline Status Null(const char* what) { return InvalidArgument(std::string(what) + ": must not be null"); }

// Runs `body` (returning a Status) and reports it, turning exceptions into kInternal.
template <typename Body>
int Guard(Body&& body) {
  try {
    return Report(body());
  } catch (const std::exception& e) {
    return Report(Internal(std::string("exception: ") + e.what()));
  } catch (...) {
    return Report(Internal("unknown exception"));
  }
}

}  // namespace gpusched::capi
