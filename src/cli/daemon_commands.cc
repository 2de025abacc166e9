// Long-running commands: `gpusched server`, `gpusched agent`, `gpusched dev`. Each runs until
// SIGINT or SIGTERM and then shuts down cleanly (running tasks of an agent are killed).

#include <iostream>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/local_cluster.h"

namespace gpusched::cli {
namespace {

template <typename T>
T OrFail(StatusOr<T> v) {
  if (!v.ok()) Fail(v.status());
  return std::move(v).value();
}

struct ServerFlags {
  std::string data_dir, listen = "127.0.0.1:7070", http = "127.0.0.1:7071", config;
  std::string store = "sqlite", etcd;
};

void AddServerFlags(CLI::App* cmd, ServerFlags& f) {
  cmd->add_option("--data-dir", f.data_dir, "Directory of the SQLite state");
  cmd->add_option("--listen", f.listen, "gRPC address")->capture_default_str();
  cmd->add_option("--http", f.http, "HTTP address (/metrics, /healthz)")->capture_default_str();
  cmd->add_option("--config", f.config, "Server configuration YAML");
}

server::ServerConfig ServerConfigFrom(const ServerFlags& f) {
  server::ServerConfig c;
  c.listen = f.listen;
  c.http = f.http;
  c.data_dir = f.data_dir;
  if (!f.config.empty()) {
    Status s = server::ApplyConfigFile(f.config, c);
    if (!s.ok()) Fail(s);
  }
  return c;
}

void RegisterServer(CLI::App& app) {
  auto f = std::make_shared<ServerFlags>();
  CLI::App* cmd = app.add_subcommand("server", "Run the control plane");
  AddServerFlags(cmd, *f);
  cmd->add_option("--store", f->store, "State store: sqlite or etcd")->capture_default_str();
  cmd->add_option("--etcd", f->etcd, "etcd URL (with --store etcd)");
  cmd->callback([f] {
    if (f->store == "etcd") {
      Fail(InvalidArgument("--store: etcd is not available in this build; use sqlite"));
    }
    if (f->store != "sqlite") Fail(InvalidArgument("--store: \"" + f->store + "\" (use sqlite)"));
    if (f->data_dir.empty()) f->data_dir = "gpusched-data";
    server::ServerConfig c = ServerConfigFrom(*f);
    BlockStopSignals();
    auto srv = OrFail(server::Server::Start(c));
    std::cerr << "gpusched server: listening on " << srv->address() << ", http "
              << (srv->http_port() > 0 ? std::to_string(srv->http_port()) : "off") << ", data "
              << c.data_dir << "\n";
    WaitForStopSignal();
    srv->Shutdown();
  });
}

void RegisterAgent(CLI::App& app) {
  auto c = std::make_shared<agent::AgentConfig>();
  CLI::App* cmd = app.add_subcommand("agent", "Run a node agent");
  cmd->add_option("--server", c->server, "Server address")->required();
  cmd->add_option("--name", c->name, "Node name (default: host name)");
  cmd->add_option("--gpus", c->gpus, "Simulated GPUs when no NVIDIA driver, e.g. 8x80GiB")
      ->capture_default_str();
  cmd->add_option("--listen", c->listen, "Address for the probe daemon and logs")
      ->capture_default_str();
  cmd->add_option("--data-dir", c->data_dir, "Directory for task logs");
  cmd->add_flag("--simulate", c->simulate, "Simulated GPUs even if NVML is present");
  cmd->callback([c] {
    BlockStopSignals();
    auto a = OrFail(agent::Agent::Start(*c));
    std::cerr << "gpusched agent " << a->name() << ": serving on " << a->address() << "\n";
    WaitForStopSignal();
    a->Shutdown();
  });
}

void RegisterDev(CLI::App& app) {
  auto f = std::make_shared<ServerFlags>();
  auto agents = std::make_shared<int>(2);
  auto gpus = std::make_shared<std::string>("8x80GiB");
  f->data_dir = ".gpusched-dev";
  CLI::App* cmd = app.add_subcommand(
      "dev", "Server, SQLite state and local agents with simulated GPUs, in one command");
  AddServerFlags(cmd, *f);
  cmd->add_option("--agents", *agents, "Number of agents")->capture_default_str();
  cmd->add_option("--gpus", *gpus, "GPUs per agent")->capture_default_str();
  cmd->callback([f, agents, gpus] {
    LocalClusterOptions o;
    o.server = ServerConfigFrom(*f);
    o.agents = *agents;
    o.gpus = *gpus;
    BlockStopSignals();
    auto cluster = OrFail(LocalCluster::Start(o));
    std::cerr << "gpusched dev: server " << cluster->address() << ", " << *agents
              << " agents x " << *gpus << ", state in " << f->data_dir << "\n"
              << "  metrics: http://127.0.0.1:" << cluster->http_port() << "/metrics\n"
              << "  try:     gpusched submit --gpus 1 -- nvidia-smi || gpusched submit "
                 "--gpu-mem 6GiB -- sh -c 'echo $CUDA_VISIBLE_DEVICES'\n"
              << "  Ctrl-C stops everything.\n";
    WaitForStopSignal();
    cluster->Shutdown();
  });
}

}  // namespace

void RegisterDaemons(CLI::App& app) {
  RegisterServer(app);
  RegisterAgent(app);
  RegisterDev(app);
}

}  // namespace gpusched::cli
