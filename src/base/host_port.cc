#include "base/host_port.h"

namespace gpusched {
namespace {

Status Bad(std::string_view field, std::string_view text, std::string_view why) {
  return InvalidArgument(std::string(field) + ": \"" + std::string(text) + "\" " +
                         std::string(why) + " (expected HOST:PORT, e.g. 127.0.0.1:7070 or [::1]:7070)");
}

}  // namespace

StatusOr<HostPort> ParseHostPort(std::string_view text, std::string_view field,
                                 bool allow_empty_host) {
  HostPort out;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return Bad(field, text, "has no closing ]");
    out.host = std::string(text.substr(1, close - 1));
    if (out.host.empty() || out.host.find_first_of("[]") != std::string::npos) {
      return Bad(field, text, "has no valid IPv6 host in brackets");
    }
    if (close + 1 == text.size()) return Bad(field, text, "has no port");
    if (text[close + 1] != ':') return Bad(field, text, "has text between ] and :");
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return Bad(field, text, "has no port");
    if (text.find(':') != colon) return Bad(field, text, "has an IPv6 host without brackets");
    out.host = std::string(text.substr(0, colon));
    if (out.host.find_first_of("[]") != std::string::npos) {
      return Bad(field, text, "has a stray bracket");
    }
    port = text.substr(colon + 1);
  }
  if (out.host.empty() && !allow_empty_host) return Bad(field, text, "has no host");
  if (port.empty()) return Bad(field, text, "has no port");
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos) {
    return Bad(field, text, "has port \"" + std::string(port) + "\", not a number from 0 to 65535");
  }
  out.port = std::stoi(std::string(port));
  if (out.port > 65535) {
    return Bad(field, text, "has port " + std::string(port) + ", out of range 0..65535");
  }
  return out;
}

std::string FormatHostPort(std::string_view host, std::string_view port) {
  const std::string h(host);
  return (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + std::string(port);
}

std::string FormatHostPort(std::string_view host, int port) {
  return FormatHostPort(host, std::to_string(port));
}

}  // namespace gpusched
