#pragma once
// What every client subcommand shares: the server address (--server, else GPUSCHED_SERVER,
// else 127.0.0.1:7070), a stub with deadlines, and exit codes scripts can trust
// (commands.h): 2 for bad input, 3 when the server cannot be reached, 1 for other failures.

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "base/status.h"
#include "gpusched/v1/gpusched.grpc.pb.h"

namespace gpusched::cli {

namespace v1 = ::gpusched::v1;

// Ends the command with `code` (main returns it).
[[noreturn]] void ExitWith(int code);
// Prints "gpusched: <message>" to stderr and ends with the exit code for `status`.
[[noreturn]] void Fail(const Status& status);
int ExitCodeFor(const Status& status);

struct ClientFlags {
  std::string server;
  bool json = false;
};
// Adds --server (and --json when `json`) to `cmd`.
void AddClientFlags(CLI::App* cmd, ClientFlags& flags, bool json = true);
std::string ResolveServer(const std::string& flag);

// A stub to the server; calls through Call() get a deadline and a clear error when the
// server is unreachable.
class Client {
 public:
  explicit Client(const std::string& server_flag);
  v1::Scheduler::Stub& stub() { return *stub_; }
  const std::string& address() const { return address_; }
  // Runs `fn(ctx)` with a deadline and converts the result; Unavailable names the address.
  template <typename Fn>
  Status Call(Fn&& fn, int deadline_s = 30) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(deadline_s));
    return Convert(fn(ctx));
  }

 private:
  Status Convert(const grpc::Status& s) const;
  std::string address_;
  std::unique_ptr<v1::Scheduler::Stub> stub_;
};

}  // namespace gpusched::cli
