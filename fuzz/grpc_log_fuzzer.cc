// gRPC's log lines as gpusched prints them (rpc/grpc_log.h): SummarizeGrpcMessage reads
// gRPC's status text (a tree of nodes with quoted, bare and nested attributes) and must take
// any bytes: one line of at most 512 bytes, valid UTF-8 when its input was, and a line logged
// under a GrpcLogCapture is kept there with a non-empty listen-failure reason.

#include <grpc/support/log.h>

#include <string>

#include "fuzz/fuzz_check.h"
#include "rpc/grpc_log.h"

namespace {

bool ValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80           ? 1
                     : (c >> 5) == 0x6  ? 2
                     : (c >> 4) == 0xE  ? 3
                     : (c >> 3) == 0x1E ? 4
                                        : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusched;
  const std::string_view text = fuzz::Text(data, size);
  const std::string summary = rpc::SummarizeGrpcMessage(text);
  FUZZ_REQUIRE(summary.size() <= 512, std::to_string(summary.size()));
  FUZZ_REQUIRE(summary.find('\n') == std::string::npos, summary);
  if (ValidUtf8(text)) FUZZ_REQUIRE(ValidUtf8(summary), summary);

  rpc::InstallGrpcLogSink();
  gpr_set_log_verbosity(GPR_LOG_SEVERITY_ERROR);  // grpc_init's default; nothing calls it here
  const std::string message(text.substr(0, text.find('\0')));  // gpr_log takes a C string
  rpc::GrpcLogCapture capture;
  gpr_log(GPR_ERROR, "%s", message.c_str());
  FUZZ_REQUIRE(capture.lines().size() == 1, std::to_string(capture.lines().size()));
  FUZZ_REQUIRE(!rpc::ListenFailureReason(capture).empty(), message);
  return 0;
}
