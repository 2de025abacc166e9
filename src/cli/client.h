#pragma once
// What every client subcommand shares: the server address (--server, else GPUSCHED_SERVER,
// else 127.0.0.1:7070; a comma-separated list names the servers of a highly available control
// plane), a stub with deadlines that follows the leader, and exit codes scripts can trust
// (commands.h): 2 for bad input, 3 when the server cannot be reached, 4 when the server does
// not accept the caller's token or refuses the call, 1 for other failures.
//
// Credentials: every call carries `authorization: Bearer TOKEN` when a token is found
// (GPUSCHED_TOKEN, else the first line of $XDG_CONFIG_HOME/gpusched/token or
// ~/.config/gpusched/token), and `x-gpusched-user` with the caller's Unix user name, which
// a server uses only with authentication off.

#include <CLI/CLI.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "cli/usage_errors.h"
#include "gpusched/v1/gpusched.grpc.pb.h"
#include "rpc/tls.h"

namespace gpusched::cli {

namespace v1 = ::gpusched::v1;


struct ClientFlags {
  std::string server;
  bool json = false;
};
// Adds --server (and --json when `json`) to `cmd`.
void AddClientFlags(CLI::App* cmd, ClientFlags& flags, bool json = true);
// The global options of every binary (main.cc): --ca FILE, --insecure and --server
// ADDR[,ADDR...] before the command's name. GlobalServer() is the latter's value ("" when not given).
void AddGlobalClientFlags(CLI::App* app);
std::string GlobalServer();
// The bearer token to send: GPUSCHED_TOKEN, else the token file (first line, trimmed); ""
// when none.
std::string ResolveToken();

// The CA certificate clients trust: the global --ca flag (main.cc sets it here), else
// GPUSCHED_CA, else none (plaintext). With one, every client connects with TLS.
void SetCaFile(const std::string& path);
std::string ResolveCaFile();
// Adds --ca FILE (SetCaFile) to `cmd`; AddClientFlags does it for every client command.
void AddCaFlag(CLI::App* cmd);
// A token travels over TLS or to this machine only (issue 36): OK when `token` is empty,
// `tls` is on, `insecure` (--insecure, global or after the command) or `address` is a
// loopback one; else PermissionDenied (exit 4) saying why and how (--ca, GPUSCHED_CA,
// --insecure). Checked before each try, before any connection is made.
Status CheckTokenTransport(const std::string& address, const std::string& token, bool tls,
                           bool insecure);

// For a process that ends with std::_Exit right after its command (the client binary,
// main.cc): a Client going away leaves its channels open instead of closing them (a channel's
// teardown took 7 % of a `gpusched submit`'s CPU), and the kernel closes them at exit. Off by
// default: a long-running process (a bench, the HA driver) makes many Clients.
void KeepChannelsUntilExit();

// Splits "a:1,b:2" into addresses (empty entries dropped).
std::vector<std::string> SplitServers(const std::string& list);
// The servers a client command talks to: its own --server, else the global one (`gpusched
// --server ADDR ls`), else GPUSCHED_SERVER, else 127.0.0.1:7070; split, each address checked
// as HOST:PORT. Errors name the setting the list came from and the value.
StatusOr<std::vector<std::string>> ResolveServerList(const std::string& flag);

// A stub to the server; calls through Call() get a deadline and a clear error when the
// server is unreachable. With several servers, a call follows the leader: a standby's
// "not leader; leader is ADDR" sends it there, an unreachable server to the next one, until
// one leads or the deadline passes. `fn` may run more than once: only idempotent calls go
// through Call (Submit carries an idempotency key, so a retry never creates a second task).
class Client {
 public:
  explicit Client(const std::string& server_flag);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  // The stub of the server being tried (the leader after a successful call).
  v1::Scheduler::Stub& stub();
  const std::string& address() const { return servers_[current_]; }
  const std::vector<std::string>& servers() const { return servers_; }
  template <typename Fn>
  Status Call(Fn&& fn, int deadline_s = 30) {
    return CallFollowingLeader([&](grpc::ClientContext& ctx) { return fn(ctx); }, deadline_s);
  }

 private:
  Status CallFollowingLeader(const std::function<grpc::Status(grpc::ClientContext&)>& fn,
                             int deadline_s);
  Status Convert(const grpc::Status& s) const;
  std::vector<std::string> servers_;
  std::string ca_file_;  // "" = plaintext
  rpc::ClientTls tls_;
  size_t current_ = 0;
  std::string token_;
  std::string unix_user_;
  std::map<std::string, std::unique_ptr<v1::Scheduler::Stub>> stubs_;
};

}  // namespace gpusched::cli
