// `gpusched extender`: gpusched's GPU placement inside kube-scheduler, as a scheduler
// extender (src/extender). Runs until SIGINT or SIGTERM.
//
//   gpusched extender --listen ADDR [--url-prefix /gpusched] [--kube-api URL]
//                     [--token-file F] [--ca-file F] [--gpushare-unit GiB|MiB]
//
// Without --kube-api, in a pod (KUBERNETES_SERVICE_HOST set) the in-cluster API server and
// service-account token are used; elsewhere the extender answers NodeList-mode filter and
// prioritize only (no bound pods known, no bind).


#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>

#include "base/clock.h"
#include "base/host_port.h"
#include "base/log.h"
#include "cli/commands.h"
#include "cli/log_flags.h"
#include "cli/signals.h"
#include "cli/usage_errors.h"
#include "extender/extender_server.h"
#include "extender/kube_api_http.h"
#include "extender/kube_sync.h"

namespace gpusched::cli {
namespace {

constexpr const char* kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

struct ExtenderFlags {
  std::string listen;
  std::string url_prefix = "/gpusched";
  std::string kube_api, token_file, ca_file;
  std::string gpushare_unit = "GiB";
  LogFlags log;
};

// Fills --kube-api, --token-file and --ca-file from the pod's environment when unset.
void InClusterDefaults(ExtenderFlags& f) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (!f.kube_api.empty() || host == nullptr || port == nullptr) return;
  f.kube_api = "https://" + FormatHostPort(host, port);
  if (f.token_file.empty()) f.token_file = std::string(kServiceAccountDir) + "/token";
  if (f.ca_file.empty()) f.ca_file = std::string(kServiceAccountDir) + "/ca.crt";
}

void RunExtender(ExtenderFlags f) {
  ApplyLogFlags(f.log);
  // Blocked before any thread starts, so every thread inherits the mask and sigwait gets them.
  BlockStopSignals();

  extender::ExtenderConfig config;
  if (f.gpushare_unit == "GiB") {
    config.model.gpushare_unit_mib = 1024;
  } else if (f.gpushare_unit == "MiB") {
    config.model.gpushare_unit_mib = 1;
  } else {
    Fail("--gpushare-unit: \"" + f.gpushare_unit + "\" (use GiB or MiB)", kExitUsage);
  }
  config.log = [](const std::string& line) { logging::Info("extender", line); };
  InClusterDefaults(f);
  RealClock clock;
  std::unique_ptr<extender::HttpKubeApi> api;
  std::unique_ptr<extender::KubeCache> cache;
  std::unique_ptr<extender::KubeSync> sync;
  if (!f.kube_api.empty()) {
    extender::KubeApiOptions options;
    options.url = f.kube_api;
    options.token_file = f.token_file;
    options.ca_file = f.ca_file;
    auto created = extender::HttpKubeApi::Create(options, clock);
    if (!created.ok()) Fail(created.status().message(), kExitUsage);
    api = std::move(created).value();
    cache = std::make_unique<extender::KubeCache>(config.model, clock);
    extender::SyncOptions sync_options;
    sync_options.log = config.log;
    sync = std::make_unique<extender::KubeSync>(*api, *cache, clock, sync_options);
    sync->Start();
  }
  extender::Extender ext(config, clock, cache.get(), api.get());
  extender::KubeCache* cache_ptr = cache.get();
  auto server = extender::ExtenderServer::Start(
      ext, extender::ServerOptions{f.listen, f.url_prefix},
      [cache_ptr] { return cache_ptr == nullptr || cache_ptr->synced(); });
  if (!server.ok()) Fail(server.status());  // malformed --listen: 2; port in use: 1
  logging::Info("extender", "serving POST " + (*server)->url_prefix() +
                                "/{filter,prioritize,bind,preempt} on " + f.listen + " (port " +
                                std::to_string((*server)->port()) + "); Kubernetes API: " +
                                (f.kube_api.empty() ? "none (NodeList mode only, no bind)"
                                                    : f.kube_api));
  WaitForStopSignal();
  (*server)->Stop();
  if (sync) sync->Stop();
}

}  // namespace

void RegisterExtender(CLI::App& app) {
  auto f = std::make_shared<ExtenderFlags>();
  CLI::App* cmd = app.add_subcommand("extender", "Serve kube-scheduler as a scheduler extender");
  cmd->add_option("--listen", f->listen, "HOST:PORT to serve on (port 0: any)")->required();
  cmd->add_option("--url-prefix", f->url_prefix, "The urlPrefix path of the scheduler config")
      ->capture_default_str();
  cmd->add_option("--kube-api", f->kube_api,
                  "Kubernetes API server URL (default in a pod: the in-cluster one)");
  cmd->add_option("--token-file", f->token_file, "Bearer token file (default in a pod: the "
                                                  "service account's)");
  cmd->add_option("--ca-file", f->ca_file, "CA bundle for an https --kube-api");
  cmd->add_option("--gpushare-unit", f->gpushare_unit,
                  "Unit of aliyun.com/gpu-mem (GiB or MiB, as gpushare's --memory-unit)")
      ->capture_default_str();
  AddLogFlags(cmd, f->log, /*config_keys=*/false);
  cmd->callback([f] { RunExtender(*f); });
}

}  // namespace gpusched::cli
