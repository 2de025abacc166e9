#include "rpc/channel.h"

#include <arpa/inet.h>

namespace gpusched::rpc {

// "A.B.C.D:PORT" as an ipv4: target: gRPC takes the address as it is instead of handing an
// address literal to its DNS resolver (a thread hop on every new channel). Anything else
// (names, IPv6, targets with a scheme) is passed through.
std::string ChannelTarget(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) return address;
  const std::string host = address.substr(0, colon);
  // Digits and dots only: inet_pton reads up to a NUL, so "1.2.3.4<NUL>x" would pass it.
  if (host.find_first_not_of("0123456789.") != std::string::npos) return address;
  in_addr ip{};
  if (inet_pton(AF_INET, host.c_str(), &ip) != 1) return address;
  for (size_t i = colon + 1; i < address.size(); ++i) {
    if (address[i] < '0' || address[i] > '9') return address;
  }
  return "ipv4:" + address;
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, bool keepalive,
                                           const ClientTls* tls) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0);
  // Reconnect quickly after a server restart (the default backoff grows to minutes).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Despite its name, gRPC reads this as the least time one connection attempt gets (TCP,
  // TLS, the server's first SETTINGS frame). 3 s: a slow handshake (a loaded machine, a
  // sanitizer build) is waited for, and a server that accepts but never answers (stopped,
  // partitioned) still leaves a client time to try the next of a list.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 3000);
  if (keepalive) {
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 1'000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 2'000);
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  }
  if (tls == nullptr || !tls->enabled()) {
    return grpc::CreateCustomChannel(ChannelTarget(address), grpc::InsecureChannelCredentials(),
                                     args);
  }
  if (!tls->server_name.empty()) args.SetSslTargetNameOverride(tls->server_name);
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = tls->ca_pem;
  ssl.pem_cert_chain = tls->cert_pem;
  ssl.pem_private_key = tls->key_pem;
  return grpc::CreateCustomChannel(ChannelTarget(address), grpc::SslCredentials(ssl), args);
}

}  // namespace gpusched::rpc
