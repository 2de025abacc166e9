#pragma once
// Client channels to a gpusched server or agent. gRPC honours http_proxy even for loopback
// addresses, so every channel disables the proxy explicitly.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "rpc/tls.h"

namespace gpusched::rpc {

// A channel to "host:port" that never uses an HTTP proxy: plaintext, or TLS when `tls` is
// given and enabled (trusting its CA, presenting its certificate when it has one). With
// `keepalive`, the channel pings every second and gives up on a peer silent for two
// (agents' links, so a stopped leader is noticed; the server permits such pings).
// The gRPC target for "host:port": "ipv4:A.B.C.D:PORT" for an IPv4 literal (no resolver),
// else the address unchanged.
std::string ChannelTarget(const std::string& address);

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, bool keepalive = false,
                                           const ClientTls* tls = nullptr);

}  // namespace gpusched::rpc
