#include "cli/closed_loop_clients.h"

#include <chrono>

namespace gpusched::cli {

std::vector<std::unique_ptr<E2eDriver>> Clients(int clients, const std::string& address,
                                                const rpc::ClientTls* tls,
                                                const std::string& token) {
  std::vector<std::unique_ptr<E2eDriver>> drivers;
  for (int c = 0; c < clients; ++c) {
    drivers.push_back(std::make_unique<E2eDriver>(address, tls, token));
    (void)drivers.back()->Ping();  // connected before the clock starts
  }
  return drivers;
}

double RpcLimitPerSecond(const std::string& address, const rpc::ClientTls* tls,
                         const std::string& token, int clients, int n) {
  std::vector<std::unique_ptr<E2eDriver>> drivers = Clients(clients, address, tls, token);
  const auto t0 = std::chrono::steady_clock::now();
  const int failed = RunClosedLoopClients<::gpusched::v1::ServerStatus>(
      drivers, n, "gs-bench-ping",
      [](E2eDriver& d, grpc::ClientContext& ctx, grpc::CompletionQueue& cq) {
        return d.StartPing(ctx, cq);
      });
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return double(n - failed) / secs;
}


}  // namespace gpusched::cli
