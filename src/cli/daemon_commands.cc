// Long-running commands: `gpusched server`, `gpusched agent`, `gpusched dev`. Each runs until
// SIGINT or SIGTERM and then shuts down cleanly. `gpusched agent` leaves its running tasks to
// their supervisors (the next agent on its data dir adopts them); `gpusched dev` kills its
// agents' tasks.

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "agent/agent_config.h"
#include "base/log.h"
#include "base/private_dir.h"
#include "base/units.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/local_cluster.h"
#include "cli/log_flags.h"
#include "cli/rule_flags.h"

namespace gpusched::cli {
namespace {

struct ServerFlags {
  std::string data_dir, listen = "127.0.0.1:7070", http = "127.0.0.1:7071", config;
  std::string store, etcd, lease_ttl, advertise, history_retention;
  std::string etcd_ca, etcd_cert, etcd_key, etcd_user, etcd_password_file;
  std::string tls_dir, auth, memory_table, default_user;
  bool insecure = false;
  LogFlags log;
};

void AddServerFlags(CLI::App* cmd, ServerFlags& f) {
  cmd->add_option("--data-dir", f.data_dir,
                  "Directory of the SQLite state: this user's, writable by no one else "
                  "(server default: /var/lib/gpusched/server as root, else "
                  "$XDG_STATE_HOME/gpusched/server)");
  cmd->add_option("--listen", f.listen, "gRPC address")->capture_default_str();
  cmd->add_option("--http", f.http, "HTTP address (dashboard, /api/v1, /metrics, /healthz)")
      ->capture_default_str();
  cmd->add_option("--config", f.config, "Server configuration YAML");
  cmd->add_option("--memory-table", f.memory_table,
                  "GPU-memory table YAML (rows and formulas): tasks may name a profile "
                  "(submit --profile) instead of a size");
  cmd->add_flag("--insecure", f.insecure,
                "Allow listening off loopback without TLS and authentication (warned loudly)");
  AddLogFlags(cmd, f.log);
}

server::ServerConfig ServerConfigFrom(const ServerFlags& f) {
  server::ServerConfig c;
  c.listen = f.listen;
  c.http = f.http;
  c.data_dir = f.data_dir;
  if (!f.config.empty()) {
    Status s = server::ApplyConfigFile(f.config, c);
    if (!s.ok()) Fail(s);
    c.config_file = f.config;
  }
  // Flags win over the file.
  if (!f.store.empty()) c.store = f.store;
  if (!f.etcd.empty()) c.etcd = f.etcd;
  for (auto [flag, field] : {std::pair{&f.etcd_ca, &c.etcd_ca}, {&f.etcd_cert, &c.etcd_cert},
                             {&f.etcd_key, &c.etcd_key}, {&f.etcd_user, &c.etcd_user},
                             {&f.etcd_password_file, &c.etcd_password_file}}) {
    if (!flag->empty()) *field = *flag;
  }
  if (!f.advertise.empty()) c.advertise = f.advertise;
  if (!f.tls_dir.empty()) c.tls_dir = f.tls_dir;
  if (!f.auth.empty()) c.auth = f.auth;
  if (!f.default_user.empty()) c.default_user = f.default_user;
  if (!f.memory_table.empty()) c.memory_table = f.memory_table;
  if (f.insecure) c.insecure = true;
  if (!f.lease_ttl.empty()) {
    auto ttl = ParseDurationMs(f.lease_ttl, "--lease-ttl");
    if (!ttl.ok()) Fail(ttl.status());
    c.lease_ttl_ms = *ttl;
  }
  if (!f.history_retention.empty()) {
    auto keep = ParseDurationMs(f.history_retention, "--history-retention");
    if (!keep.ok()) Fail(keep.status());
    c.history_retention_ms = *keep;
  }
  ApplyLogFlags(f.log, c.log_level, c.log_format, f.config);
  if (Status s = c.Validate(); !s.ok()) Fail(s);
  return c;
}

void RegisterServer(CLI::App& app) {
  auto f = std::make_shared<ServerFlags>();
  CLI::App* cmd = app.add_subcommand("server", "Run the control plane");
  AddServerFlags(cmd, *f);
  cmd->add_option("--store", f->store,
                  "State store: sqlite (default; in --data-dir) or etcd (a highly available "
                  "control plane: run several servers on the same --etcd)");
  cmd->add_option("--etcd", f->etcd,
                  "etcd client URLs, comma-separated (with --store etcd); http:// only on "
                  "loopback unless --insecure, https:// with --etcd-ca/--etcd-cert/--etcd-key");
  cmd->add_option("--etcd-ca", f->etcd_ca,
                  "PEM CA of etcd's server certificate (https:// endpoints; default: the "
                  "system's roots)");
  cmd->add_option("--etcd-cert", f->etcd_cert,
                  "PEM client certificate presented to etcd (its --client-cert-auth)");
  cmd->add_option("--etcd-key", f->etcd_key, "PEM key of --etcd-cert");
  cmd->add_option("--etcd-user", f->etcd_user,
                  "etcd user to authenticate as (with --etcd-password-file)");
  cmd->add_option("--etcd-password-file", f->etcd_password_file,
                  "File whose first line is --etcd-user's password");
  cmd->add_option("--lease-ttl", f->lease_ttl,
                  "Leader lease with etcd: a standby takes over within about this (default 5s)");
  cmd->add_option("--history-retention", f->history_retention,
                  "Finished tasks older than this move from the store to DATA_DIR/archive.db "
                  "(show and acct still find them); 0 = keep all (default 30d)");
  cmd->add_option("--advertise", f->advertise,
                  "The gRPC address clients and agents should use for this server (default: "
                  "--listen)");
  cmd->add_option("--tls-dir", f->tls_dir,
                  "Serve gRPC and HTTP over TLS with DIR/server.crt, server.key and ca.crt "
                  "(`gpusched certs init DIR`); agents must present a certificate naming "
                  "their node");
  cmd->add_option("--auth", f->auth,
                  "API authentication: token (bearer tokens; the first start writes "
                  "DATA_DIR/admin-token) or none (default: token unless --listen is loopback)");
  cmd->add_option("--default-user", f->default_user,
                  "With --auth none: the account a task runs as when the server cannot prove "
                  "its submitter's Unix user (the owner of a loopback connection); never root "
                  "(default: nobody)");
  cmd->callback([f] {
    if (f->data_dir.empty() && f->store != "etcd") f->data_dir = DefaultStateDir("server");
    server::ServerConfig c = ServerConfigFrom(*f);
    BlockStopSignals();
    BlockHangupSignal();  // issue 39: SIGHUP reloads --config
    auto srv = OrFail(server::Server::Start(c));
    std::ostringstream line;
    line << "listening on " << srv->address() << (c.tls_dir.empty() ? "" : " (TLS)") << ", http"
         << (c.tls_dir.empty() || srv->http_port() <= 0 ? " " : "s ")
         << (srv->http_port() > 0 ? std::to_string(srv->http_port()) : "off") << ", "
         << (c.store == "etcd" ? "etcd " + c.etcd + " (standby until elected)"
                               : "data " + c.data_dir)
         << ", auth " << (c.AuthEnabled() ? "token" : "none");
    logging::Info("server", line.str());
    WaitForStopSignal([&srv] {
      Status s = srv->ReloadConfig();  // the control plane logs what it applied
      if (!s.ok()) logging::Error("server", "SIGHUP: " + s.message());
    });
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

// `agent --config FILE` under the flags: a flag given wins; the file's labels and taints add
// to the flags' (a label in both keeps the flag's value).
void MergeAgentConfigFile(const std::string& path, CLI::App* cmd, agent::AgentConfig& c) {
  std::ifstream in(path);
  if (!in) Fail(InvalidArgument("--config: cannot read " + path));
  std::stringstream text;
  text << in.rdbuf();
  agent::AgentConfig file;
  file.server.clear();  // only what the file says
  if (Status s = agent::ApplyAgentConfigYaml(text.str(), path, file); !s.ok()) Fail(s);
  // Keys without a flag (issue 39): the file's, or the defaults.
  c.log_max_size_bytes = file.log_max_size_bytes;
  c.task_files_retention_ms = file.task_files_retention_ms;
  c.log_level = file.log_level;
  c.log_format = file.log_format;
  using Field = std::string agent::AgentConfig::*;
  const std::pair<const char*, Field> scalars[] = {
      {"--server", &agent::AgentConfig::server},   {"--name", &agent::AgentConfig::name},
      {"--gpus", &agent::AgentConfig::gpus},       {"--listen", &agent::AgentConfig::listen},
      {"--data-dir", &agent::AgentConfig::data_dir}, {"--tls-dir", &agent::AgentConfig::tls_dir},
      {"--topology", &agent::AgentConfig::topology}};
  for (const auto& [flag, field] : scalars) {
    if (cmd->count(flag) == 0) c.*field = file.*field;
  }
  for (const auto& [key, value] : file.labels) c.labels.emplace(key, value);
  c.taints.insert(c.taints.begin(), file.taints.begin(), file.taints.end());
}

// Issue 35: the agent token to send on the link: the first line of `file`, else GPUSCHED_TOKEN
// (then taken out of this process's environment: tasks inherit the agent's). "" = none.
std::string AgentToken(const std::string& file) {
  std::string token;
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) Fail(InvalidArgument("--token-file: cannot read " + file));
    std::getline(in, token);
  } else if (const char* env = std::getenv("GPUSCHED_TOKEN"); env != nullptr) {
    token = env;
  }
  unsetenv("GPUSCHED_TOKEN");
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.front()))) {
    token.erase(0, 1);
  }
  if (!file.empty() && token.empty()) Fail(InvalidArgument("--token-file: " + file + " is empty"));
  return token;
}

// `agent`'s flags that are not AgentConfig fields (parsed or merged in the callback).
struct AgentFlags {
  std::string executor = "process";
  std::string config_file;
  std::vector<std::string> labels, taints;
  std::string health_period = "5m";
  std::string memory_grace = "30s";
  std::string token_file;
  LogFlags log;
};

// --server through --taint: where the agent reports, and what node it is.
void AddAgentNodeFlags(CLI::App* cmd, agent::AgentConfig& c, AgentFlags& f) {
  cmd->add_option("--server", c.server,
                  "Server address, or the comma-separated servers of an HA control plane "
                  "(required, here or in --config)");
  cmd->add_option("--config", f.config_file,
                  "Agent configuration YAML: server, name, gpus, listen, data_dir, tls_dir, "
                  "topology, labels, taints (flags given as well win)");
  cmd->add_option("--name", c.name, "Node name (default: host name)");
  cmd->add_option("--gpus", c.gpus, "Simulated GPUs when no NVIDIA driver, e.g. 8x80GiB")
      ->capture_default_str();
  cmd->add_option("--listen", c.listen, "Address for the probe daemon and logs")
      ->capture_default_str();
  cmd->add_option("--data-dir", c.data_dir,
                  "Directory for task logs and the task journal; keep it across restarts so "
                  "the agent adopts its running tasks; it must be this user's and writable by "
                  "no one else (default: /var/lib/gpusched/agent-NAME as root, else "
                  "$XDG_STATE_HOME/gpusched/agent-NAME)");
  cmd->add_flag("--simulate", c.simulate, "Simulated GPUs even if NVML is present");
  AddRepeatable(cmd, "--label", f.labels,
                "Node label KEY=VALUE, repeatable; tasks pick nodes by label (submit --selector)");
  AddRepeatable(cmd, "--taint", f.taints,
                "Node taint KEY[=VALUE]:EFFECT (NoSchedule, PreferNoSchedule or NoExecute), "
                "repeatable; only tasks that tolerate it (submit --toleration) are placed here");
}

// --executor through --topology: how tasks run and how the GPUs are watched.
void AddAgentGpuFlags(CLI::App* cmd, agent::AgentConfig& c, AgentFlags& f) {
  AddExecutorFlag(cmd, f.executor);
  cmd->add_option("--gpu-memory-grace", f.memory_grace,
                  "How long a task may hold more GPU memory than its share (NVML) before the "
                  "watchdog stops it")
      ->capture_default_str();
  cmd->add_option("--fault-file", c.fault_file,
                  "Inject GPU faults for tests: lines \"GPU xid CODE\", \"GPU ecc [COUNT]\" or "
                  "\"GPU lost\", read as they are appended");
  cmd->add_option("--gpu-health-period", f.health_period,
                  "How long a GPU that had a fault must pass its health checks before it "
                  "takes tasks again")
      ->capture_default_str();
  cmd->add_option("--topology", c.topology,
                  "Simulated GPU interconnect: pcie, nvlink-pairs or nvswitch (default: NVML's; "
                  "none with simulated GPUs)");
}

// --tls-dir through --preload: the agent's identity, and whom and what its tasks run as.
void AddAgentTrustFlags(CLI::App* cmd, agent::AgentConfig& c, AgentFlags& f) {
  cmd->add_option("--tls-dir", c.tls_dir,
                  "Mutual TLS to the server: present DIR/NAME.crt and NAME.key (NAME = --name), "
                  "trust DIR/ca.crt (`gpusched certs init DIR --agent NAME`)");
  cmd->add_option("--token-file", f.token_file,
                  "An agent token for this node (`gpusched token create --agent NAME`), sent "
                  "to a server with --auth token when there is no TLS (default: "
                  "GPUSCHED_TOKEN)");
  cmd->add_flag("--run-as-self", c.run_as_self,
                "Even as root, run every task as this agent's user instead of its submitter's "
                "account (nodes where the submitters have no accounts: containers, tests)");
  cmd->add_option("--preload", c.preload_path,
                  "The GPU-memory share library injected into GPU tasks (default: "
                  "libgpusched_preload.so next to gpusched; \"none\" = do not inject)");
}

// The flags over the config file over the defaults; then the agent runs until SIGINT or
// SIGTERM.
void RunAgent(agent::AgentConfig& c, const AgentFlags& f, CLI::App* cmd) {
  c.token = AgentToken(f.token_file);
  c.labels = LabelFlags(f.labels, "--label");
  c.taints = TaintFlags(f.taints, "--taint");
  if (cmd->count("--server") == 0) c.server.clear();  // no default: say where
  if (!f.config_file.empty()) MergeAgentConfigFile(f.config_file, cmd, c);
  ApplyLogFlags(f.log, c.log_level, c.log_format, f.config_file);
  if (c.server.empty()) c.server = GlobalServer();  // `gpusched --server ADDR agent`
  if (c.server.empty()) {
    Fail(InvalidArgument("--server: missing; give --server ADDR (or server: in --config)"));
  }
  c.executor = ExecutorFrom(f.executor);
  c.gpu_health_period_ms = OrFail(ParseDurationMs(f.health_period, "gpu-health-period"));
  c.gpu_memory_grace_ms = OrFail(ParseDurationMs(f.memory_grace, "gpu-memory-grace"));
  BlockStopSignals();
  auto a = OrFail(agent::Agent::Start(c));
  logging::Info("agent", "serving on " + a->address() + ", data " + a->data_dir(),
                logging::NodeF(a->name()));
  WaitForStopSignal();
  // Like a kubelet or slurmd restart: the tasks run on under their supervisors, and the
  // next agent on this data dir adopts them.
  a->Shutdown(agent::ShutdownMode::kLeaveTasks);
}

void RegisterAgent(CLI::App& app) {
  auto c = std::make_shared<agent::AgentConfig>();
  auto f = std::make_shared<AgentFlags>();
  CLI::App* cmd = app.add_subcommand("agent", "Run a node agent");
  AddAgentNodeFlags(cmd, *c, *f);
  AddAgentGpuFlags(cmd, *c, *f);
  AddAgentTrustFlags(cmd, *c, *f);
  AddLogFlags(cmd, f->log);
  cmd->callback([c, f, cmd] { RunAgent(*c, *f, cmd); });
}

void RegisterDev(CLI::App& app) {
  auto f = std::make_shared<ServerFlags>();
  auto agents = std::make_shared<int>(2);
  auto gpus = std::make_shared<std::string>("8x80GiB");
  auto executor = std::make_shared<std::string>("process");
  auto ha = std::make_shared<bool>(false);
  f->data_dir = ".gpusched-dev";
  CLI::App* cmd = app.add_subcommand(
      "dev", "Server, SQLite state and local agents with simulated GPUs, in one command");
  AddServerFlags(cmd, *f);
  cmd->add_option("--agents", *agents, "Number of agents")->capture_default_str();
  cmd->add_option("--gpus", *gpus, "GPUs per agent")->capture_default_str();
  AddExecutorFlag(cmd, *executor);
  cmd->add_flag("--ha", *ha,
                "A highly available control plane instead: 3 etcd members, 3 servers and the "
                "agents as separate processes on free loopback ports");
  cmd->add_option("--lease-ttl", f->lease_ttl, "Leader lease with --ha (default 5s)");
  cmd->callback([f, agents, gpus, executor, ha] {
    if (*ha) {
      auto ttl = ParseDurationMs(f->lease_ttl.empty() ? "5s" : f->lease_ttl, "--lease-ttl");
      if (!ttl.ok()) Fail(ttl.status());
      RunDevHa(*agents, *gpus, *executor, *ttl / 1000);
      return;
    }
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
