#include "cli/client.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <thread>

#include "base/host_port.h"
#include "cli/commands.h"
#include "cli/usage_errors.h"
#include "rpc/channel.h"
#include "rpc/grpc_status.h"
#include "rpc/leader_hint.h"

namespace gpusched::cli {

namespace {
std::string& GlobalServerFlag() {
  static std::string server;
  return server;
}
}  // namespace

// The server list in force and the setting it came from (named in errors): the command's
// --server, else the global one, else GPUSCHED_SERVER, else the default.
struct ServerSetting {
  std::string list;
  std::string field;
};

ServerSetting ResolveServerSetting(const std::string& flag) {
  if (!flag.empty()) return {flag, "--server"};
  if (!GlobalServerFlag().empty()) return {GlobalServerFlag(), "--server"};
  const char* env = std::getenv("GPUSCHED_SERVER");
  if (env != nullptr && *env != '\0') return {env, "GPUSCHED_SERVER"};
  return {"127.0.0.1:7070", "default server"};
}

namespace {

std::string Trim(std::string s) {
  const char* space = " \t\r\n";
  s.erase(0, s.find_first_not_of(space));
  const size_t end = s.find_last_not_of(space);
  s.erase(end == std::string::npos ? 0 : end + 1);
  return s;
}

std::string TokenFile() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  if (xdg != nullptr && *xdg != '\0') return std::string(xdg) + "/gpusched/token";
  const char* home = std::getenv("HOME");
  if (home == nullptr || *home == '\0') {
    const passwd* pw = getpwuid(geteuid());
    home = pw != nullptr ? pw->pw_dir : nullptr;
  }
  return home != nullptr ? std::string(home) + "/.config/gpusched/token" : "";
}

// "" when unknown, or not printable ASCII (gRPC metadata could not carry it).
std::string UnixUser() {
  const passwd* pw = getpwuid(geteuid());
  std::string name = pw != nullptr && pw->pw_name != nullptr ? pw->pw_name : "";
  for (char c : name) {
    if (c < 0x21 || c > 0x7e) return "";
  }
  return name;
}

// gRPC metadata carries printable ASCII only; a token is never anything else.
bool SendableToken(const std::string& token) {
  for (char c : token) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

}  // namespace

std::string ResolveToken() {
  const char* env = std::getenv("GPUSCHED_TOKEN");
  if (env != nullptr && *env != '\0') return Trim(env);
  const std::string path = TokenFile();
  if (path.empty()) return "";
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  return Trim(line);
}

namespace {
std::string& CaFlag() {
  static std::string ca;
  return ca;
}
}  // namespace

void SetCaFile(const std::string& path) { CaFlag() = path; }

std::string ResolveCaFile() {
  if (!CaFlag().empty()) return CaFlag();
  const char* env = std::getenv("GPUSCHED_CA");
  return env != nullptr ? env : "";
}

void AddCaFlag(CLI::App* cmd) {
  cmd->add_option_function<std::string>(
      "--ca", SetCaFile,
      "CA certificate to trust (ca.crt of `gpusched certs init`): connect with TLS "
      "(default: $GPUSCHED_CA; neither = plaintext)");
}

namespace {
bool insecure_flag = false;

void AddInsecureFlag(CLI::App* cmd) {
  cmd->add_flag_callback(
      "--insecure", [] { insecure_flag = true; },
      "Send the token even in cleartext to a server off this machine (no --ca): only on a "
      "network you trust");
}
}  // namespace

Status CheckTokenTransport(const std::string& address, const std::string& token,
                           bool tls, bool insecure) {
  if (token.empty() || tls || insecure || rpc::IsLoopbackHost(rpc::HostOf(address))) {
    return Status::Ok();
  }
  return PermissionDenied(
      "token: refusing to send your token in cleartext to " + address +
      ", which is not this machine and no CA is set (anyone on the path could read it and "
      "act as you): pass --ca FILE or set GPUSCHED_CA to the cluster's ca.crt to connect "
      "with TLS, or pass --insecure to send it anyway on a network you trust");
}

namespace {
constexpr const char* kServerHelp =
    "Server address, or a comma-separated list of the servers of an HA control plane "
    "(default: $GPUSCHED_SERVER, else 127.0.0.1:7070)";
}  // namespace

void AddGlobalClientFlags(CLI::App* app) {
  AddCaFlag(app);
  AddInsecureFlag(app);
  app->add_option_function<std::string>(
      "--server", [](const std::string& list) { GlobalServerFlag() = list; },
      std::string(kServerHelp) + "; also accepted after the command's name, which wins");
}

std::string GlobalServer() { return GlobalServerFlag(); }

void AddClientFlags(CLI::App* cmd, ClientFlags& flags, bool json) {
  AddCaFlag(cmd);
  AddInsecureFlag(cmd);
  cmd->add_option("--server", flags.server, kServerHelp);
  if (json) cmd->add_flag("--json", flags.json, "Machine-readable JSON output");
}

std::vector<std::string> SplitServers(const std::string& list) {
  return rpc::SplitServerList(list);
}

StatusOr<std::vector<std::string>> ResolveServerList(const std::string& flag) {
  const ServerSetting setting = ResolveServerSetting(flag);
  std::vector<std::string> servers = SplitServers(setting.list);
  if (servers.empty()) {
    return InvalidArgument(setting.field + ": no address in \"" + setting.list +
                           "\" (expected HOST:PORT, or several separated by commas)");
  }
  // Checked here: gRPC would take port 99999 as 34463, and answer a malformed address with
  // a log line of its own and "Failed to create secure client channel".
  for (const std::string& address : servers) {
    GS_RETURN_IF_ERROR(ParseHostPort(address, setting.field).status());
  }
  return servers;
}

Client::Client(const std::string& server_flag)
    : servers_(OrFail(ResolveServerList(server_flag))),
      ca_file_(ResolveCaFile()),
      token_(ResolveToken()),
      unix_user_(UnixUser()) {
  if (!ca_file_.empty()) {
    auto tls = rpc::LoadClientTls(ca_file_);
    if (!tls.ok()) {
      Fail(InvalidArgument("--ca / GPUSCHED_CA: " + tls.status().message()));
    }
    tls_ = std::move(tls).value();
  }
}

namespace {
bool keep_channels_until_exit = false;
}  // namespace

void KeepChannelsUntilExit() { keep_channels_until_exit = true; }

Client::~Client() {
  if (!keep_channels_until_exit) return;
  // Never destroyed: the process ends with std::_Exit, which runs no destructor anyway.
  static auto* kept = new std::vector<std::unique_ptr<v1::Scheduler::Stub>>();
  for (auto& [address, stub] : stubs_) {
    if (stub) kept->push_back(std::move(stub));
  }
}

v1::Scheduler::Stub& Client::stub() {
  auto& stub = stubs_[servers_[current_]];
  if (!stub) stub = v1::Scheduler::NewStub(rpc::MakeChannel(servers_[current_], false, &tls_));
  return *stub;
}

Status Client::CallFollowingLeader(const std::function<grpc::Status(grpc::ClientContext&)>& fn,
                                   int deadline_s) {
  if (!SendableToken(token_)) {
    return Unauthenticated("token: the token from GPUSCHED_TOKEN or the token file holds a "
                           "space, control or non-ASCII character; a gpusched token is "
                           "gst_<id>_<secret> on one line");
  }
  const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(deadline_s);
  size_t unanswered = 0;  // servers in a row that could not be reached or had no leader
  // With several servers, one try may not take the whole deadline: a leader that stopped
  // answering (SIGSTOP, a partition) must not hold the call until it ends.
  const auto per_try = std::chrono::seconds(servers_.size() > 1 ? 5 : deadline_s);
  const auto no_leader_deadline =
      std::min(deadline, std::chrono::system_clock::now() + std::chrono::seconds(10));
  for (;;) {
    // Before every try: a leader hint may name another server.
    GS_RETURN_IF_ERROR(
        CheckTokenTransport(servers_[current_], token_, tls_.enabled(), insecure_flag));
    grpc::ClientContext ctx;
    if (!token_.empty()) ctx.AddMetadata("authorization", "Bearer " + token_);
    if (!unix_user_.empty()) ctx.AddMetadata("x-gpusched-user", unix_user_);
    const auto try_deadline = std::min(deadline, std::chrono::system_clock::now() + per_try);
    ctx.set_deadline(try_deadline);
    grpc::Status s = fn(ctx);
    if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && try_deadline < deadline) {
      s = grpc::Status(grpc::StatusCode::UNAVAILABLE, servers_[current_] + " did not answer in " +
                                                          std::to_string(per_try.count()) + " s");
    }
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE) return Convert(s);
    const bool not_leader = rpc::IsNotLeader(s.error_message());
    // One server that cannot be reached: say so at once, as before (exit 3).
    if (servers_.size() == 1 && !not_leader) return Convert(s);
    const std::string hint = not_leader ? rpc::LeaderHint(s.error_message()) : "";
    if (!hint.empty() && hint != servers_[current_]) {
      auto it = std::find(servers_.begin(), servers_.end(), hint);
      if (it == servers_.end()) it = servers_.insert(servers_.end(), hint);
      current_ = static_cast<size_t>(it - servers_.begin());
      continue;  // straight to the leader
    }
    // No leader anywhere: an election takes about one lease TTL; past no_leader_budget it is
    // not an election but an outage (etcd down), and the caller is told.
    const bool out_of_time = std::chrono::system_clock::now() >= deadline ||
                             (not_leader && std::chrono::system_clock::now() >= no_leader_deadline);
    if (out_of_time) {
      if (not_leader) {
        return Unavailable("no leader among " + std::to_string(servers_.size()) +
                           " server(s); " + servers_[current_] + " said: " + s.error_message());
      }
      return Convert(s);
    }
    current_ = (current_ + 1) % servers_.size();
    // A whole round without a leader (an election in progress): pause before the next one.
    if (++unanswered % servers_.size() == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

namespace {

// What gRPC says when a TLS handshake fails (wrong CA, a plaintext server).
bool LooksLikeTlsFailure(const std::string& message) {
  for (const char* word : {"Ssl", "SSL", "handshake", "certificate", "CERTIFICATE", "TSI_"}) {
    if (message.find(word) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

Status Client::Convert(const grpc::Status& s) const {
  Status out = rpc::FromGrpc(s);
  if (out.code() == StatusCode::kUnauthenticated) {
    return Unauthenticated(
        "not authenticated by " + servers_[current_] + " (" + s.error_message() + "): " +
        (token_.empty() ? "no token was sent; set GPUSCHED_TOKEN or put a token in "
                        : "the token sent was refused; set GPUSCHED_TOKEN to a valid one or put "
                          "it in ") +
        "~/.config/gpusched/token; an admin creates one with `gpusched token create --user "
        "NAME`");
  }
  if (out.code() == StatusCode::kPermissionDenied) {
    return PermissionDenied(s.error_message() + " (server " + servers_[current_] +
                            "; an admin can do it, or give you an admin token)");
  }
  if (out.code() == StatusCode::kUnavailable && !rpc::IsNotLeader(s.error_message())) {
    std::string names = servers_[current_];
    if (servers_.size() > 1) {
      names = "any of";
      for (const std::string& a : servers_) names += " " + a;
    }
    if (LooksLikeTlsFailure(s.error_message()) && !ca_file_.empty()) {
      return Unavailable("TLS with the server at " + names + " failed (" + s.error_message() +
                         "): check that it runs with --tls-dir and that " + ca_file_ +
                         " (--ca / GPUSCHED_CA) is the ca.crt of its `gpusched certs init` "
                         "directory; a server without TLS needs no --ca");
    }
    return Unavailable("cannot reach the server at " + names + " (" + s.error_message() +
                       "); start one with `gpusched dev` or set --server / GPUSCHED_SERVER" +
                       (ca_file_.empty()
                            ? "; if the server uses TLS (--tls-dir), pass --ca FILE or set "
                              "GPUSCHED_CA to its ca.crt"
                            : ""));
  }
  return out;
}

}  // namespace gpusched::cli
