#include "base/cluster_id.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace gpusched {

StatusOr<std::string> NewClusterId() {
  uint8_t bytes[kClusterIdLength / 2];
  size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return Unavailable(std::string("cluster id: cannot read random bytes: ") +
                         std::strerror(errno));
    }
    got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id;
  id.reserve(kClusterIdLength);
  for (uint8_t b : bytes) {
    id.push_back(kHex[b >> 4]);
    id.push_back(kHex[b & 0xf]);
  }
  return id;
}

Status ValidateClusterId(std::string_view id, std::string_view what) {
  bool ok = id.size() == kClusterIdLength;
  for (char c : id) ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  if (ok) return Status::Ok();
  std::string shown(id.substr(0, 64));
  for (char& c : shown) {
    if (c < 0x20 || c > 0x7e) c = '?';  // never a control character into a log line
  }
  return InvalidArgument(std::string(what) + ": \"" + shown + "\"" +
                         (id.size() > 64 ? "..." : "") + " is not a cluster id (" +
                         std::to_string(kClusterIdLength) + " lower-case hex digits)");
}

}  // namespace gpusched
