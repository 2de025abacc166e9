// Long-running commands: `gpusched server`, `gpusched agent`, `gpusched dev`. Each runs until
// SIGINT or SIGTERM and then shuts down cleanly. `gpusched agent` leaves its running tasks to
// their supervisors (the next agent on its data dir adopts them); `gpusched dev` kills its
// agents' tasks.

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
  cmd->add_option("--http", f.http, "HTTP address (dashboard, /api/v1, /metrics, /healthz)")
      ->capture_default_str();
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

// Adds --executor process|noop (into `executor`).
void AddExecutorFlag(CLI::App* cmd, std::string& executor) {
  cmd->add_option("--executor", executor,
                  "How tasks run: process (real processes) or noop (none: each task \"runs\" "
                  "for its duration, for benchmarks)")
      ->capture_default_str();
}

agent::ExecutorKind ExecutorFrom(const std::string& executor) {
  auto kind = agent::ParseExecutorKind(executor);
  if (!kind.ok()) Fail(kind.status());
  return *kind;
}

void RegisterAgent(CLI::App& app) {
  auto c = std::make_shared<agent::AgentConfig>();
  auto executor = std::make_shared<std::string>("process");
  CLI::App* cmd = app.add_subcommand("agent", "Run a node agent");
  cmd->add_option("--server", c->server, "Server address")->required();
  cmd->add_option("--name", c->name, "Node name (default: host name)");
  cmd->add_option("--gpus", c->gpus, "Simulated GPUs when no NVIDIA driver, e.g. 8x80GiB")
      ->capture_default_str();
  cmd->add_option("--listen", c->listen, "Address for the probe daemon and logs")
      ->capture_default_str();
  cmd->add_option("--data-dir", c->data_dir,
                  "Directory for task logs and the task journal; keep it across restarts so "
                  "the agent adopts its running tasks (default: gpusched-agent-NAME in the "
                  "temp dir)");
  cmd->add_flag("--simulate", c->simulate, "Simulated GPUs even if NVML is present");
  AddExecutorFlag(cmd, *executor);
  cmd->callback([c, executor] {
    c->executor = ExecutorFrom(*executor);
    BlockStopSignals();
    auto a = OrFail(agent::Agent::Start(*c));
    std::cerr << "gpusched agent " << a->name() << ": serving on " << a->address() << ", data "
              << a->data_dir() << "\n";
    WaitForStopSignal();
    // Like a kubelet or slurmd restart: the tasks run on under their supervisors, and the
    // next agent on this data dir adopts them.
    a->Shutdown(agent::ShutdownMode::kLeaveTasks);
  });
}

void RegisterDev(CLI::App& app) {
  auto f = std::make_shared<ServerFlags>();
  auto agents = std::make_shared<int>(2);
  auto gpus = std::make_shared<std::string>("8x80GiB");
  auto executor = std::make_shared<std::string>("process");
  f->data_dir = ".gpusched-dev";
  CLI::App* cmd = app.add_subcommand(
      "dev", "Server, SQLite state and local agents with simulated GPUs, in one command");
  AddServerFlags(cmd, *f);
  cmd->add_option("--agents", *agents, "Number of agents")->capture_default_str();
  cmd->add_option("--gpus", *gpus, "GPUs per agent")->capture_default_str();
  AddExecutorFlag(cmd, *executor);
  cmd->callback([f, agents, gpus, executor] {
    LocalClusterOptions o;
    o.server = ServerConfigFrom(*f);
    o.agents = *agents;
    o.gpus = *gpus;
    o.executor = ExecutorFrom(*executor);
    BlockStopSignals();
    auto cluster = OrFail(LocalCluster::Start(o));
    std::cerr << "gpusched dev: server " << cluster->address() << ", " << *agents
              << " agents x " << *gpus << ", state in " << f->data_dir << "\n"
              << "  dashboard: http://127.0.0.1:" << cluster->http_port() << "/\n"
              << "  REST API:  http://127.0.0.1:" << cluster->http_port()
              << "/api/v1 (see /api/v1/openapi.json)\n"
              << "  metrics:   http://127.0.0.1:" << cluster->http_port() << "/metrics\n"
              << "  try:       gpusched submit --gpus 1 -- nvidia-smi || gpusched submit "
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
