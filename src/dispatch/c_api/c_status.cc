#include "dispatch/c_api/c_status.h"

namespace gpusched::capi {
namespace {
thread_local std::string last_error;
}  // namespace

int Report(const Status& s) {
  if (s.ok()) {
    last_error.clear();
    return 0;
  }
  last_error = s.ToString();
  return static_cast<int>(s.code());
}

int ReportCode(int code, const std::string& message) {
  last_error = message;
  return code;
}

const char* LastError() { return last_error.c_str(); }

}  // namespace gpusched::capi
