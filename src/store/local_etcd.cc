#include "store/local_etcd.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "store/etcd_client.h"

namespace gpusched::store {

bool LocalEtcd::Installed(const std::string& etcd) {
  if (etcd.find('/') != std::string::npos) return access(etcd.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::string p = path == nullptr ? "/usr/bin:/bin" : path;
  size_t start = 0;
  while (start <= p.size()) {
    size_t colon = p.find(':', start);
    if (colon == std::string::npos) colon = p.size();
    const std::string candidate = p.substr(start, colon - start) + "/" + etcd;
    if (access(candidate.c_str(), X_OK) == 0) return true;
    start = colon + 1;
  }
  return false;
}

StatusOr<std::unique_ptr<LocalEtcd>> LocalEtcd::Start(Options options) {
  if (options.members < 1) return InvalidArgument("etcd members must be >= 1");
  if (!Installed(options.etcd)) {
    return Unavailable("etcd: no '" + options.etcd +
                       "' binary found; install Debian's etcd-server (scripts/install-deps)");
  }
  std::error_code ec;
  std::filesystem::create_directories(options.dir, ec);
  if (ec) return InvalidArgument("etcd dir: cannot create " + options.dir + ": " + ec.message());
  std::unique_ptr<LocalEtcd> e(new LocalEtcd(std::move(options)));
  for (int i = 0; i < e->options_.members; ++i) {
    const char* scheme = e->options_.cert_file.empty() ? "http://" : "https://";
    e->client_urls_.push_back(scheme + std::string("127.0.0.1:") +
                              std::to_string(FreeLoopbackPort()));
    e->peer_urls_.push_back("http://127.0.0.1:" + std::to_string(FreeLoopbackPort()));
  }
  e->token_ = "gpusched-" + std::to_string(getpid()) + "-" + std::to_string(FreeLoopbackPort());
  for (int i = 0; i < e->options_.members; ++i) {
    e->procs_.push_back(std::make_unique<ChildProcess>());
    GS_RETURN_IF_ERROR(e->procs_.back()->StartProgram(
        e->options_.etcd, e->Args(i), e->options_.dir + "/m" + std::to_string(i) + ".log"));
  }
  GS_RETURN_IF_ERROR(e->WaitHealthy(20'000));
  return e;
}

LocalEtcd::~LocalEtcd() { KillAll(); }

std::vector<std::string> LocalEtcd::Args(int i) const {
  std::string cluster;
  for (size_t j = 0; j < peer_urls_.size(); ++j) {
    if (j > 0) cluster += ",";
    cluster += "m" + std::to_string(j) + "=" + peer_urls_[j];
  }
  std::vector<std::string> args = {"--name", "m" + std::to_string(i),
          "--data-dir", options_.dir + "/m" + std::to_string(i),
          "--listen-client-urls", client_urls_[i],
          "--advertise-client-urls", client_urls_[i],
          "--listen-peer-urls", peer_urls_[i],
          "--initial-advertise-peer-urls", peer_urls_[i],
          "--initial-cluster", cluster,
          "--initial-cluster-state", "new",
          "--initial-cluster-token", token_,
          "--log-level", "warn",
          "--logger", "zap"};
  if (!options_.cert_file.empty()) {
    args.insert(args.end(), {"--cert-file", options_.cert_file, "--key-file", options_.key_file});
  }
  if (!options_.client_ca_file.empty()) {
    args.insert(args.end(), {"--client-cert-auth", "--trusted-ca-file", options_.client_ca_file});
  }
  return args;
}

std::string LocalEtcd::client_urls() const {
  std::string out;
  for (const std::string& u : client_urls_) out += (out.empty() ? "" : ",") + u;
  return out;
}

void LocalEtcd::Kill(int member) {
  if (member >= 0 && member < members()) procs_[member]->Kill(SIGKILL);
}

void LocalEtcd::KillAll() {
  for (auto& p : procs_) p->Kill(SIGKILL);
}

Status LocalEtcd::Restart(int member) {
  if (member < 0 || member >= members()) return InvalidArgument("etcd member out of range");
  return procs_[member]->StartProgram(options_.etcd, Args(member),
                                      options_.dir + "/m" + std::to_string(member) + ".log");
}

Status LocalEtcd::WaitHealthy(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  Status last = Unavailable("etcd: no member running");
  for (;;) {
    bool all = true;
    for (int i = 0; i < members(); ++i) {
      if (!procs_[i]->running()) continue;
      EtcdClient::Options o = options_.client;
      o.connect_timeout_ms = 200;
      o.request_timeout_ms = 1'000;
      auto c = EtcdClient::Create({client_urls_[i]}, o);
      Status s = c.ok() ? (*c)->Range("/gpusched-health").status() : c.status();
      if (!s.ok()) {
        all = false;
        last = s;
        break;
      }
      last = Status::Ok();
    }
    if (all && last.ok()) return Status::Ok();
    if (std::chrono::steady_clock::now() > deadline) {
      return Unavailable("etcd did not become healthy in " + std::to_string(timeout_ms) +
                         " ms (logs in " + options_.dir + "): " + last.message());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace gpusched::store
