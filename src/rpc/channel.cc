#include "rpc/channel.h"

namespace gpusched::rpc {

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, bool keepalive,
                                           const ClientTls* tls) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0);
  // Reconnect quickly after a server restart (the default backoff grows to minutes).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  if (keepalive) {
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 1'000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 2'000);
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  }
  if (tls == nullptr || !tls->enabled()) {
    return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  }
  if (!tls->server_name.empty()) args.SetSslTargetNameOverride(tls->server_name);
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = tls->ca_pem;
  ssl.pem_cert_chain = tls->cert_pem;
  ssl.pem_private_key = tls->key_pem;
  return grpc::CreateCustomChannel(address, grpc::SslCredentials(ssl), args);
}

}  // namespace gpusched::rpc
