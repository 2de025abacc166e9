#pragma once
// Client channels to a gpusched server or agent. gRPC honours http_proxy even for loopback
// addresses, so every channel disables the proxy explicitly.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

namespace gpusched::rpc {

// An insecure channel to "host:port" that never uses an HTTP proxy.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address);

}  // namespace gpusched::rpc
