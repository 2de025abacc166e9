#include "server/server.h"

#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include <filesystem>
#include <iostream>
#include <thread>

#include "base/clock.h"
#include "server/agent_link_service.h"
#include "server/api_service.h"
#include "server/control_plane.h"
#include "server/http_routes.h"
#include "server/probe_daemon.h"
#include "store/memory_store.h"
#include "store/sqlite_store.h"

namespace gpusched::server {

struct Server::Impl {
  RealClock clock;
  std::unique_ptr<ControlPlane> cp;
  std::unique_ptr<ApiService> api;
  std::unique_ptr<AgentLinkService> link;
  std::unique_ptr<grpc::Server> grpc;
  std::unique_ptr<ProbeDaemon> probe;
  std::unique_ptr<httplib::Server> http;
  std::thread http_thread;
  std::string address;
  int http_port = 0;
  std::mutex mu;
  std::condition_variable cv;
  bool down = false;
};

namespace {

StatusOr<std::unique_ptr<store::StateStore>> OpenStore(const ServerConfig& config) {
  if (config.data_dir.empty()) return std::unique_ptr<store::StateStore>(new store::MemoryStore);
  std::error_code ec;
  std::filesystem::create_directories(config.data_dir, ec);
  if (ec) return InvalidArgument("data_dir: cannot create " + config.data_dir + ": " + ec.message());
  store::SqliteStore::Options options;
  options.fsync_every_commit = config.fsync_every_commit;
  GS_ASSIGN_OR_RETURN(std::unique_ptr<store::SqliteStore> s,
                      store::SqliteStore::Open(config.data_dir + "/state.db", options));
  return std::unique_ptr<store::StateStore>(std::move(s));
}

StatusOr<std::pair<std::string, int>> SplitHostPort(const std::string& addr,
                                                    const std::string& field) {
  const size_t colon = addr.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return InvalidArgument(field + ": \"" + addr + "\" is not HOST:PORT");
  }
  try {
    size_t used = 0;
    const int port = std::stoi(addr.substr(colon + 1), &used);
    if (used == addr.size() - colon - 1 && port >= 0 && port <= 65535) {
      return std::make_pair(addr.substr(0, colon), port);
    }
  } catch (const std::exception&) {  // stoi: not a number
  }
  return InvalidArgument(field + ": \"" + addr + "\" has no valid port");
}

Status StartHttp(Server::Impl& s, const std::string& addr) {
  GS_ASSIGN_OR_RETURN(auto hp, SplitHostPort(addr, "http"));
  s.http = std::make_unique<httplib::Server>();
  RegisterHttpRoutes(*s.http, *s.cp);
  s.http_port = hp.second == 0 ? s.http->bind_to_any_port(hp.first)
                               : (s.http->bind_to_port(hp.first, hp.second) ? hp.second : -1);
  if (s.http_port <= 0) return Unavailable("http: cannot listen on " + addr);
  s.http_thread = std::thread([&s] { s.http->listen_after_bind(); });
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<Server>> Server::Start(const ServerConfig& config) {
  GS_RETURN_IF_ERROR(config.Validate());
  GS_ASSIGN_OR_RETURN(auto listen, SplitHostPort(config.listen, "listen"));
  auto impl = std::make_unique<Impl>();
  GS_ASSIGN_OR_RETURN(std::unique_ptr<store::StateStore> store, OpenStore(config));
  GS_ASSIGN_OR_RETURN(impl->cp, ControlPlane::Create(config, impl->clock, std::move(store)));
  impl->api = std::make_unique<ApiService>(*impl->cp);
  impl->link = std::make_unique<AgentLinkService>(*impl->cp);

  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(config.listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(impl->api.get());
  builder.RegisterService(impl->link.get());
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  impl->grpc = builder.BuildAndStart();
  if (!impl->grpc || port == 0) {
    return Unavailable("listen: cannot listen on " + config.listen + " (port in use?)");
  }
  impl->address = listen.first + ":" + std::to_string(port);
  if (!config.http.empty()) GS_RETURN_IF_ERROR(StartHttp(*impl, config.http));
  impl->cp->StartLoop();
  impl->probe = std::make_unique<ProbeDaemon>(*impl->cp, impl->clock);
  impl->probe->Start();
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Shutdown(); }

const std::string& Server::address() const { return impl_->address; }
int Server::http_port() const { return impl_->http_port; }

void Server::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->down) return;
    impl_->down = true;
  }
  if (impl_->http) {
    impl_->http->stop();
    if (impl_->http_thread.joinable()) impl_->http_thread.join();
  }
  if (impl_->probe) impl_->probe->Stop();
  impl_->grpc->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  impl_->cp->StopLoop();
  impl_->cv.notify_all();
}

void Server::Wait() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->cv.wait(lock, [&] { return impl_->down; });
}

}  // namespace gpusched::server
