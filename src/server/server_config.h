#pragma once
// ServerConfig: every option of `gpusched server` in one explicit struct, filled from flags
// and an optional YAML file (--config). Unknown keys and bad values are errors naming them.
// docs/server-config.md lists every key with its default and claim (ServerConfigKeys).
//
// Example file:
//   t1: 5s                 # CN115981827A pass period (passes also run on every event)
//   t2: 30s                # CN115981827A FQ -> Q period
//   fail_max: 3            # CN115981827A FAIL_MAX
//   node_timeout: 10s      # CN109992422A T_srv: a silent node is unreachable after this
//   node_lost_after: 5m    # ... and its tasks are re-queued after this (issue 37)
//   task_timeout: 30s      # CN109992422A T_task
//   node_heartbeat: 2s     # what agents are told to send
//   task_heartbeat: 5s
//   probe_interval: 10s    # CN115981827A claim 9 probe daemon
//   probe_timeout: 1s
//   kill_grace: 10s        # SIGTERM -> SIGKILL on agents
//   capacity_wait: failure_queue # the default (PATENTS.md section 6), or stay_queued
//   retain_finished: 10000 # finished tasks kept in memory (the store keeps them longer)
//   retain_finished_for: 1h
//   history_retention: 30d # issue 38: finished tasks move to DATA_DIR/archive.db after this
//   store: etcd            # sqlite (the default with a data dir) or etcd (HA)
//   etcd: http://10.0.0.1:2379,http://10.0.0.2:2379,http://10.0.0.3:2379
//   lease_ttl: 5s          # leader lease: a standby takes over within about this
//   etcd_prefix: /gpusched # several control planes can share one etcd cluster
//   etcd_ca: /etc/gpusched/etcd/ca.crt      # https:// endpoints: the CA, and the client
//   etcd_cert: /etc/gpusched/etcd/client.crt  # certificate etcd's --client-cert-auth asks
//   etcd_key: /etc/gpusched/etcd/client.key
//   etcd_user: gpusched    # etcd's authentication, the password in the file's first line
//   etcd_password_file: /etc/gpusched/etcd/password
//   etcd_max_txn_ops: 128  # etcd's --max-txn-ops: one commit is one etcd transaction
//   etcd_max_request_bytes: 1400000  # below etcd's --max-request-bytes (1.5 MiB default)
//   idle_after: 30m        # a task at 0 % GPU utilisation this long is idle; 0 = off
//   idle_action: flag      # or stop: an idle task is killed and ends failed
//   auth: token            # or none; default: token unless listen is a loopback address
//   tls_dir: /etc/gpusched/tls  # `gpusched certs init` output: gRPC and HTTP over TLS
//   insecure: false        # true = allow a non-loopback address without TLS (warned)
//   allow_root_tasks: false  # agents running as root may start tasks as uid 0
//   private_data: false    # true: only a task's owner and admins see its command and workdir
//   log_level: info        # trace|debug|info|warn|error (--log-level wins)
//   log_format: text       # or json: one object per line (--log-format wins)
//   memory_table: tables/gpu-memory.yaml  # CN109992422A claim 1 (or the table inline)
//   node_order: weighted_score  # or load_balance: CN109992422A claim 4 (fewest running tasks,
//                               # then lowest mean GPU occupancy, then name)
//                               # or min_fragmentation: least growth of expected GPU
//                               # fragmentation against the task shapes seen so far
//   gpu_order: spread      # or best_fit: GPUs inside the node (CN109992422A claims 3-4),
//                          # or min_fragmentation (use it with the node order of that name)
//   score_weights: {least_allocated: 1, balanced_allocation: 1}  # weighted_score's plugins;
//                          # also server_load, gpu_best_fit. Scorers not named weigh 0.
//   use_reported_free: false  # true: free = min(reported by the agent, accounted)
//   parallel_threshold: 100  # CN115981827A claim 1 N_par: above this many reachable nodes
//   parallel_chunks: 16      # W chunks of the node filter
//   node_index: true         # weighted_score decisions walk the node index (issue 43), the
//                            # same choices as the scan; false = scan (in parallel above N_par)
//   node_index_min_nodes: 2000  # ... on clusters of at least this many nodes (below, the
//                            # scan is faster: bench core)
//   filter_workers: 0        # threads for them; 0 = one per core (at most W), 1 = sequential
//   # The doors (docs/auth.md "Limits at the doors"):
//   http_max_body: 1MiB      # a larger request body is refused (413) and never read
//   http_header_timeout: 10s # a request's line and headers must arrive within this
//   http_max_connections: 256  # open HTTP connections; more are answered 503
//   http_hosts: gpu-master.example.com  # names besides the listen/http/advertise hosts
//   stream_limit: 64         # open Watch, event and log-follow streams, all users
//   stream_limit_per_user: 16  # ... of one user (429 / RESOURCE_EXHAUSTED above)

#include <string>
#include <vector>

#include "base/status.h"
#include "core/scheduler_config.h"

namespace gpusched::server {

struct ServerConfig {
  std::string listen = "127.0.0.1:7070";  // gRPC
  std::string http;                       // "" = no HTTP endpoint
  std::string data_dir;                   // "" = in-memory store (tests, benchmarks)
  // Issue 39: the --config file, read again by `gpusched admin reload` and SIGHUP ("" = none).
  std::string config_file;
  // "sqlite" (in data_dir; memory without one) or "etcd": a highly available control plane
  // of several servers, one leader elected through an etcd lease (server/leader_election.h).
  std::string store = "sqlite";
  std::string etcd;                       // etcd client URLs, comma-separated
  std::string etcd_prefix = "/gpusched";
  // Issue 38: TLS to etcd (https:// endpoints; PEM files) and etcd's own users. A
  // non-loopback http:// endpoint is refused unless `insecure`.
  std::string etcd_ca, etcd_cert, etcd_key;
  std::string etcd_user, etcd_password_file;
  // What one commit may carry: etcd's --max-txn-ops and (below) its --max-request-bytes, as
  // the etcd cluster is configured (issue 38: one commit is one etcd transaction).
  int64_t etcd_max_txn_ops = 128;
  int64_t etcd_max_request_bytes = 1'400'000;
  DurationMs lease_ttl_ms = 5'000;
  // The gRPC address standbys name to clients; "" = the address bound (--listen).
  std::string advertise;
  core::SchedulerConfig scheduler = DefaultSchedulerConfig();
  DurationMs node_heartbeat_ms = 2'000;
  DurationMs task_heartbeat_ms = 5'000;
  DurationMs probe_interval_ms = 10'000;
  DurationMs probe_timeout_ms = 1'000;
  DurationMs kill_grace_ms = 10'000;
  // Largest pause of the scheduling loop between events (liveness checks run this often).
  DurationMs loop_tick_ms = 100;
  // SQLite's `synchronous` (config key sqlite_synchronous: full | normal): FULL syncs the WAL
  // at every commit, so an acknowledged task survives power loss, not only a crash of the
  // process (DESIGN.md's promise). Group commit makes it one fsync per group of writes.
  bool fsync_every_commit = true;
  // Bounded memory: a finished task leaves the server's memory once more than
  // `retain_finished` are kept or it finished `retain_finished_ms` ago, whichever comes
  // first. It stays in the store (show, logs, ls and accounting read it from there) until
  // history_retention.
  int64_t retain_finished = 10'000;
  DurationMs retain_finished_ms = 3'600'000;
  // Issue 38: bounded history. A finished task whose wall-clock finish is older than this is
  // written to the archive (DATA_DIR/archive.db, store/task_archive.h) and then deleted from
  // the store; `show` and `acct` still find it there. 0 = keep every task in the store. Without
  // a data directory there is no archive and nothing is deleted.
  DurationMs history_retention_ms = 30LL * 86'400'000;
  // Longest wait between retries of a failed store commit (exponential backoff from 50 ms).
  DurationMs store_retry_max_ms = 5'000;
  // Idle allocations: a running task whose GPUs stay at 0 % utilisation (its task heartbeats
  // say so) for idle_after is flagged idle (ls, show, /metrics); with idle_stop it is also
  // stopped and ends failed, not retried. 0 = off.
  DurationMs idle_after_ms = 30 * 60'000;
  bool idle_stop = false;  // idle_action: flag (false) or stop (true)
  // API authentication: "token" (bearer tokens, server/tokens.h), "none", or "" = token
  // when `listen` or `http` is not a loopback address, none when both are (`gpusched dev`
  // stays zero-set-up). AuthEnabled() resolves it.
  std::string auth;
  bool AuthEnabled() const;
  // Trust (DESIGN.md "Trust"). tls_dir: DIR/server.crt, server.key and ca.crt; gRPC and HTTP
  // are served over TLS, agents must present a certificate of that CA naming their node.
  std::string tls_dir;
  // Listening off loopback without TLS and authentication is refused unless this is set.
  bool insecure = false;
  // Whether agents running as root may start a task as a uid-0 account (sent at registration).
  bool allow_root_tasks = false;
  // After Slurm's PrivateData (issue 36): a task's command and working directory are shown
  // to its owner and admins only (server/access.h RedactForCaller; its environment always
  // is), and /metrics names no team unless an admin's token reads it.
  bool private_data = false;
  // Issue 35: with authentication off, the account a task runs as when the server cannot
  // prove who submitted it (server/peer_identity.h): a caller from another machine, a
  // connection whose owner the kernel does not tell. Never a uid-0 account.
  std::string default_user = "nobody";
  // CN109992422A claim 1: the GPU-memory table a task's `profile` is looked up in (rows and
  // formulas, spec/spec_yaml.h), loaded at start. `memory_table`: a YAML file (--memory-table
  // FILE, or `memory_table: FILE` in the config file, relative to that file);
  // `memory_table_yaml`: a table written inline in the config file (`memory_table: {rows:
  // [...]}`). Both may be given; the learned peaks that refine them live in the store.
  std::string memory_table;
  std::string memory_table_yaml;
  // Issue 36: learn GPU-memory peaks that a task could have written (its peak file with
  // simulated GPUs, the preload ledger in its address space), not only those the agent
  // measured itself (NVML). For tests and demos on one user's machine only: with it, one
  // task's report sets the estimate of every task of its profile.
  bool learn_task_written_peaks = false;
  // Issue 39: the daemon's log (base/log.h): `log_level` trace|debug|info|warn|error and
  // `log_format` text|json; "" = not given (info, text). --log-level and --log-format win.
  std::string log_level;
  std::string log_format;
  // CN115981827A claim 1: threads of the pool the server lends the scheduler for the parallel
  // node filter (above scheduler.placement.parallel_threshold reachable nodes, in
  // parallel_chunks chunks). 0 = one per CPU core, at most parallel_chunks; 1 = no pool.
  int64_t filter_workers = 0;
  // The doors (issue 36). http_max_body: bytes of a request body, refused before it is
  // read when larger. http_header_timeout_ms: the request line and headers' deadline.
  // http_max_connections: HTTP connections open at once. http_hosts: names (comma-separated)
  // a request's Host may carry besides IP addresses, localhost, this machine's name and the
  // listen, http and advertise hosts. stream_limit(_per_user): open gRPC Watch and REST
  // event/log streams in total and per user.
  int64_t http_max_body = 1 << 20;
  DurationMs http_header_timeout_ms = 10'000;
  int64_t http_max_connections = 256;
  std::string http_hosts;
  int64_t stream_limit = 64;
  int64_t stream_limit_per_user = 16;
  // The pool size filter_workers asks for on this machine.
  size_t FilterWorkers() const;

  // The core's defaults: a task no node fits waits in FQ until the next t2 (PATENTS.md
  // section 6; core/README.md "The failure queue at scale").
  static core::SchedulerConfig DefaultSchedulerConfig();
  Status Validate() const;
};

// Whether `config` may listen where it is asked to: an address off loopback (gRPC or HTTP)
// needs tls_dir and authentication (auth not "none"), or `insecure`. The error says how to
// fix it. Sets *warn when the start is allowed only because of `insecure`.
Status CheckExposure(const ServerConfig& config, bool* warn);

// Applies the keys of a YAML file to `config`. Errors name the file and the key.
Status ApplyConfigFile(const std::string& path, ServerConfig& config);

// Every key ApplyConfigFile knows; any other key is refused. docs/server-config.md lists each
// (test/config_reference_test.cc keeps the two equal).
std::vector<std::string> ServerConfigKeys();
// Whether `value` given for `key` leaves the config as the defaults have it (the reference's
// documented defaults are checked with it). NotFound for a key that takes a mapping or a list
// or that does not exist; InvalidArgument for a bad value.
StatusOr<bool> IsServerConfigDefault(const std::string& key, const std::string& value);

}  // namespace gpusched::server
