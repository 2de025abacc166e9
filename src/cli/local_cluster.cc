#include "cli/local_cluster.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>


namespace gpusched::cli {

StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(const LocalClusterOptions& o) {
  if (o.agents < 0 || o.agents > 256) {
    return InvalidArgument("--agents: " + std::to_string(o.agents) + " must be 0..256");
  }
  auto c = std::unique_ptr<LocalCluster>(new LocalCluster);
  GS_ASSIGN_OR_RETURN(c->server_, server::Server::Start(o.server));
  // Agents keep their logs and journals under the server's data directory, or without one
  // (an in-memory server) in a fresh private directory of their own: zero set-up, and no
  // name in /tmp that someone else could have taken first.
  std::string agents_dir = o.server.data_dir;
  if (agents_dir.empty() && o.agents > 0) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                          "/gpusched-dev-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      return Internal("cannot create a directory for the agents in " + pattern + ": " +
                      std::strerror(errno));
    }
    agents_dir = pattern;
  }
  for (int i = 1; i <= o.agents; ++i) {
    agent::AgentConfig a;
    a.server = c->server_->address();
    a.name = "dev-" + std::to_string(i);
    a.gpus = o.gpus;
    a.simulate = true;
    a.quiet = o.quiet_agents;
    a.executor = o.executor;
    a.tls_dir = o.server.tls_dir;  // with TLS, DIR/dev-N.crt and .key must exist
    a.run_as_self = true;  // a developer's own cluster: tasks run as the developer
    a.data_dir = agents_dir + "/" + a.name;
    if (o.server.AuthEnabled() && o.server.tls_dir.empty()) {  // an agent token (issue 35)
      GS_ASSIGN_OR_RETURN(a.token, c->server_->CreateAgentToken(a.name));
    }
    GS_ASSIGN_OR_RETURN(std::unique_ptr<agent::Agent> ag, agent::Agent::Start(a));
    c->agents_.push_back(std::move(ag));
  }
  return c;
}

LocalCluster::~LocalCluster() { Shutdown(); }

void LocalCluster::Shutdown() {
  for (auto& a : agents_) a->Shutdown(agent::ShutdownMode::kKillTasks);
  if (server_) server_->Shutdown();
}

}  // namespace gpusched::cli
