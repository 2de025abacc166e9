#pragma once
// Network addresses as users and config files write them: "HOST:PORT", with an IPv6 host in
// brackets ("[::1]:7070"). One parser for every listen address, peer and endpoint.

#include <string>
#include <string_view>

#include "base/status.h"

namespace gpusched {

struct HostPort {
  std::string host;  // without the brackets of an IPv6 literal; "" when the text was ":PORT"
  int port = 0;      // 0..65535 (0: the OS picks one, for a listen address)
};

// Parses "HOST:PORT" or "[V6]:PORT". The port is decimal digits only, 0..65535. An empty host
// is refused unless `allow_empty_host` (a listen address ":8080" meaning every interface).
// Errors name the field and the value: `listen: "[::1]" has no port (expected HOST:PORT)`.
StatusOr<HostPort> ParseHostPort(std::string_view text, std::string_view field,
                                 bool allow_empty_host = false);

// "host:port", or "[host]:port" when host has a ':' (IPv6).
std::string FormatHostPort(std::string_view host, int port);
// The same with the port as text (e.g. from the environment), not checked.
std::string FormatHostPort(std::string_view host, std::string_view port);

}  // namespace gpusched
