// The kernel's answer to a socket-diagnostics lookup (server/peer_identity.h,
// ParseInetDiagReply): whatever the bytes, a socket or a Status, and never a read past them.

#include <string_view>

#include "fuzz/fuzz_check.h"
#include "server/peer_identity.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto s = gpusched::server::ParseInetDiagReply(bytes);
  FUZZ_REQUIRE(s.ok() || !s.status().message().empty(), "a refusal says why");
  return 0;
}
