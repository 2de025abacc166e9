#pragma once
// LocalCluster: a server and N agents with simulated GPUs in this process, on loopback
// (`gpusched dev`, the demo and `bench e2e`). Task processes are real unless the executor is
// noop; Shutdown (and the destructor) kills them: they must not outlive the command.

#include <memory>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "base/status.h"
#include "cli/signals.h"
#include "server/server.h"

namespace gpusched::cli {

struct LocalClusterOptions {
  // With server.tls_dir, agent dev-N presents DIR/dev-N.crt (`certs init --agent dev-N`).
  server::ServerConfig server;
  int agents = 2;
  std::string gpus = "8x80GiB";
  bool quiet_agents = false;
  agent::ExecutorKind executor = agent::ExecutorKind::kProcess;
};

class LocalCluster {
 public:
  static StatusOr<std::unique_ptr<LocalCluster>> Start(const LocalClusterOptions& options);
  ~LocalCluster();
  const std::string& address() const { return server_->address(); }
  int http_port() const { return server_->http_port(); }
  void Shutdown();

 private:
  std::unique_ptr<server::Server> server_;
  std::vector<std::unique_ptr<agent::Agent>> agents_;
};


}  // namespace gpusched::cli
