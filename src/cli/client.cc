#include "cli/client.h"

#include <cstdlib>
#include <iostream>

#include "cli/commands.h"
#include "rpc/channel.h"
#include "rpc/grpc_status.h"

namespace gpusched::cli {

void ExitWith(int code) { throw CLI::RuntimeError(code); }

int ExitCodeFor(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk: return kExitOk;
    case StatusCode::kInvalidArgument:
    case StatusCode::kResourceExhausted: return kExitUsage;
    case StatusCode::kUnavailable: return kExitUnavailable;
    default: return kExitFailure;
  }
}

void Fail(const Status& s) {
  std::cerr << "gpusched: " << s.message() << "\n";
  ExitWith(ExitCodeFor(s));
}

std::string ResolveServer(const std::string& flag) {
  if (!flag.empty()) return flag;
  const char* env = std::getenv("GPUSCHED_SERVER");
  if (env != nullptr && *env != '\0') return env;
  return "127.0.0.1:7070";
}

void AddClientFlags(CLI::App* cmd, ClientFlags& flags, bool json) {
  cmd->add_option("--server", flags.server,
                  "Server address (default: $GPUSCHED_SERVER, else 127.0.0.1:7070)");
  if (json) cmd->add_flag("--json", flags.json, "Machine-readable JSON output");
}

Client::Client(const std::string& server_flag)
    : address_(ResolveServer(server_flag)),
      stub_(v1::Scheduler::NewStub(rpc::MakeChannel(address_))) {}

Status Client::Convert(const grpc::Status& s) const {
  Status out = rpc::FromGrpc(s);
  if (out.code() == StatusCode::kUnavailable) {
    return Unavailable("cannot reach the server at " + address_ + " (" + s.error_message() +
                       "); start one with `gpusched dev` or set --server / GPUSCHED_SERVER");
  }
  return out;
}

}  // namespace gpusched::cli
