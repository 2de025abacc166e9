// `gpusched bench e2e [--store sqlite|etcd] [--json]`: the whole control plane on loopback. 16
// agents x 8 simulated GPUs in this process, a real server with its SQLite store (or a real
// 3-member etcd cluster, as the HA control plane stores its state), trivial tasks (/bin/true,
// one whole GPU each) run as real processes. Reports tasks submitted -> started -> finished per
// second and submit -> start latency (server timestamps: accepted -> agent reported running).
// With --tls the same run goes over TLS: certificates made in the run's temp dir (certs init),
// the server with --tls-dir, every agent presenting its own certificate (mutual TLS), the
// clients trusting the CA; run both to report the cost of TLS as a ratio. With --auth the
// server asks for bearer tokens (--auth token) and every client call carries the admin token
// its first start wrote: --tls --auth against neither is the cost of security.

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/percentile.h"
#include "cli/certs.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/e2e_driver.h"
#include "cli/local_cluster.h"
#include "store/local_etcd.h"

namespace gpusched::cli {

void RegisterBenchE2e(CLI::App& bench) {
  auto json = std::make_shared<bool>(false);
  auto tasks = std::make_shared<int>(3000);
  auto agents = std::make_shared<int>(16);
  auto clients = std::make_shared<int>(4);
  auto store = std::make_shared<std::string>("sqlite");
  auto tls = std::make_shared<bool>(false);
  auto auth = std::make_shared<bool>(false);
  CLI::App* cmd = bench.add_subcommand("e2e", "Control plane end to end: tasks per second");
  cmd->add_flag("--json", *json, "Print one JSON object");
  cmd->add_option("--tasks", *tasks, "Tasks to run")->capture_default_str();
  cmd->add_option("--agents", *agents, "Agents of 8 simulated GPUs")->capture_default_str();
  cmd->add_option("--clients", *clients, "Concurrent submitting clients")->capture_default_str();
  cmd->add_option("--store", *store, "sqlite, or etcd (a 3-member etcd cluster on loopback)")
      ->capture_default_str();
  cmd->add_flag("--tls", *tls,
                "TLS on every connection (server, agents with client certificates, clients), "
                "certificates made in a temp dir");
  cmd->add_flag("--auth", *auth,
                "Bearer tokens: the server runs with --auth token and every call carries a token");
  cmd->callback([=] {
    if (*tasks < 1 || *agents < 1 || *clients < 1) {
      Fail(InvalidArgument("--tasks, --agents and --clients must be >= 1"));
    }
    const std::string dir = (std::filesystem::temp_directory_path() /
                             ("gpusched-bench-e2e-" + std::to_string(getpid())))
                                .string();
    LocalClusterOptions o;
    o.server.listen = "127.0.0.1:0";
    o.server.data_dir = dir;
    o.agents = *agents;
    o.gpus = "8x80GiB";
    o.quiet_agents = true;
    rpc::ClientTls client_tls;
    if (*tls) {
      CertsRequest certs;
      certs.dir = dir + "/tls";
      for (int i = 1; i <= *agents; ++i) certs.agents.push_back("dev-" + std::to_string(i));
      if (auto made = InitCerts(certs); !made.ok()) Fail(made.status());
      o.server.tls_dir = certs.dir;
      auto loaded = rpc::LoadClientTls(certs.dir + "/ca.crt");
      if (!loaded.ok()) Fail(loaded.status());
      client_tls = std::move(loaded).value();
    }
    if (*auth) o.server.auth = "token";
    std::unique_ptr<store::LocalEtcd> etcd;
    if (*store == "etcd") {
      store::LocalEtcd::Options eo;
      eo.dir = dir + "/etcd";
      auto e = store::LocalEtcd::Start(eo);
      if (!e.ok()) Fail(e.status());
      etcd = std::move(e).value();
      o.server.store = "etcd";
      o.server.etcd = etcd->client_urls();
    } else if (*store != "sqlite") {
      Fail(InvalidArgument("--store: \"" + *store + "\" (use sqlite or etcd)"));
    }
    auto cluster = LocalCluster::Start(o);
    if (!cluster.ok()) Fail(cluster.status());
    std::string token;
    if (*auth) {  // the first start of a server with authentication writes it
      std::ifstream in(dir + "/admin-token");
      if (!std::getline(in, token) || token.empty()) {
        Fail(FailedPrecondition("bench e2e --auth: the server wrote no " + dir + "/admin-token"));
      }
    }
    E2eDriver probe((*cluster)->address(), &client_tls, token);
    Status ready = probe.WaitForNodes(*agents, 60'000);
    if (!ready.ok()) Fail(ready);
    const auto t0 = std::chrono::steady_clock::now();
    std::atomic<int> next{0};
    std::atomic<int> errors{0};
    std::vector<std::thread> threads;
    for (int c = 0; c < *clients; ++c) {
      threads.emplace_back([&] {
        E2eDriver d((*cluster)->address(), &client_tls, token);
        core::TaskSpec s;
        s.gpus = 1;
        s.command = {"true"};
        s.duration_ms = 1000;
        while (next.fetch_add(1) < *tasks) {
          if (!d.Submit(s).ok()) ++errors;
        }
      });
    }
    for (auto& t : threads) t.join();
    std::vector<::gpusched::v1::Task> done;
    for (;;) {
      auto list = probe.List("succeeded");
      if (list.ok() && static_cast<int>(list->size()) + errors.load() >= *tasks) break;
      if (std::chrono::steady_clock::now() - t0 > std::chrono::minutes(5)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // poll period
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto all = probe.List();
    std::vector<double> latency;
    int64_t finished = 0;
    if (all.ok()) {
      for (const auto& t : *all) {
        if (t.state() == "succeeded") ++finished;
        if (t.started_ms() > 0) latency.push_back(double(t.started_ms() - t.submitted_ms()));
      }
    }
    (*cluster)->Shutdown();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    const double rate = double(finished) / secs;
    const double p50 = PercentileOf(latency, 50), p99 = PercentileOf(latency, 99);
    if (*json) {
      std::cout << nlohmann::json{{"store", *store},
                                  {"tls", *tls},
                                  {"auth", *auth},
                                  {"agents", *agents},
                                  {"gpus", *agents * 8},
                                  {"tasks", finished},
                                  {"tasks_per_s", rate},
                                  {"submit_to_start_p50_ms", p50},
                                  {"submit_to_start_p99_ms", p99},
                                  {"submit_errors", errors.load()},
                                  {"seconds", secs}}
                       .dump()
                << "\n";
    } else {
      std::cout << "bench e2e: " << *store << " store" << (*tls ? ", TLS" : "") << (*auth ? ", tokens" : "") << ", " << *agents << " agents x 8 simulated GPUs, " << finished << "/"
                << *tasks << " tasks (/bin/true, 1 GPU each) in " << secs << " s\n"
                << "  throughput            " << rate << " tasks/s (submitted -> finished)\n"
                << "  submit -> start p50   " << p50 << " ms\n"
                << "  submit -> start p99   " << p99 << " ms\n";
    }
    if (finished < *tasks) ExitWith(kExitFailure);
  });
}

}  // namespace gpusched::cli
