#pragma once
// `gpusched certs init`: a cluster CA and the key pairs of the servers and agents, with the
// OpenSSL C API (no openssl binary). Layout in rpc/tls.h.
//
// Keys are EC P-256, written 0600 and never overwritten; certificates are X.509 v3 with
// random 159-bit serials, valid from an hour ago (clock skew) for kCaDays (the CA) or
// kLeafDays (the rest). The server's certificate names every --server-host plus localhost
// and 127.0.0.1 (serverAuth only); the servers' log reader names rpc::kServerCertName
// (clientAuth only); agent NAME's has CN=NAME and DNS:NAME (clientAuth, and serverAuth for
// its log service). Issue 35: each party's key lies in its own bundle, the CA key apart.
//
// Running it again on a directory reuses its CA and only adds what is missing, so an agent
// can be added later. A file without its pair (a key without its certificate, or the
// reverse) is an error naming it: nothing is silently replaced. A directory of the older
// flat layout (DIR/ca.key) is refused, saying why.

#include <string>
#include <vector>

#include "base/status.h"

namespace gpusched::cli {

inline constexpr int kCaDays = 3650;
inline constexpr int kLeafDays = 825;

struct CertsRequest {
  std::string dir;
  std::vector<std::string> server_hosts;  // besides localhost and 127.0.0.1
  std::vector<std::string> agents;
};

// What InitCerts did, path by path, for the command's report.
struct CertsResult {
  std::vector<std::string> created;  // files written
  std::vector<std::string> kept;     // pairs already there, left as they were
  std::vector<std::string> notes;    // e.g. a kept server certificate missing a requested host
};

StatusOr<CertsResult> InitCerts(const CertsRequest& request);

}  // namespace gpusched::cli
